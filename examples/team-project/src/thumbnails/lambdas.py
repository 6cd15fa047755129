"""The callbacks, one per lambda. The worker image runs `atf worker thumbnails.lambdas:lambdas`, which
serves the lambdas its ECS service names (ATF_LAMBDA); `--only NAME` picks one by hand."""

from __future__ import annotations

import os

from atf_sdk import Fatal, Lambdas, Retry, TaskContext

lambdas = Lambdas()

# Given to the hosts by the CDK app (deploy/app.py): the bucket as plain environment, the token as a secret.
BUCKET_ENV = "THUMBNAIL_BUCKET"
TOKEN_ENV = "WEBHOOK_TOKEN"


@lambdas.register("resize")
def resize(task: TaskContext) -> None:
    image = task.payload.get("image")
    if not isinstance(image, str) or not image:
        raise Fatal("no image to resize")  # for good: a dead letter
    width = int(task.payload.get("width", 128))
    bucket = os.environ.get(BUCKET_ENV, "local")
    # task.attempt is the fencing token: a write tagged with it lets the store refuse a late, older attempt.
    print(f"resized {image} to {width}px into s3://{bucket}/thumbs/ (attempt {task.attempt})", flush=True)


@lambdas.register("notify")
def notify(task: TaskContext) -> None:
    if not os.environ.get(TOKEN_ENV) and task.attempt == 1:
        raise Retry("webhook token not there yet", after=1)
    print(f"notified {task.payload.get('user', 'someone')} (attempt {task.attempt})", flush=True)
