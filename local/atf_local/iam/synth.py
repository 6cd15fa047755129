"""python -m atf_local.iam.synth ADDRESS LOCK IDLE_SECONDS MOST_REQUESTS: the synthesis service
(atf_local.iam.synth_service says why it exists and how it is asked). It synthesizes the CDK app's
flattened template for each local stack's configuration it is sent, one at a time, in this process.
aws-cdk-lib loads at the first request: a service that finds another holding the lock ends cheaply.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import socket
import sys
import tempfile
import traceback
from pathlib import Path
from typing import TYPE_CHECKING, Any

from atf_core.config import StackConfig
from atf_local.iam.synth_service import receive_line, send_line
from atf_local.iam.template import LOCAL_ENVIRONMENT, cdk_context, flatten

if TYPE_CHECKING:
    from atf_cdk.environment import AtfProps


def local_props(config: StackConfig) -> AtfProps:
    """The local stack as an environment: a worker service per lambda, as the repository's environments
    have. The configuration is taken as it is: the naming rules of a deployed environment
    (atf_cdk.settings) are not the local stack's."""
    from atf_cdk.environment import AtfProps
    from atf_cdk.service import WorkerService

    workers = [WorkerService(name=name, lambdas=[name]) for name in config.lambdas]
    return AtfProps(config=config, workers=workers, stage=LOCAL_ENVIRONMENT)


def synthesize(config: StackConfig) -> dict[str, Any]:
    """The flattened template of the local stack for `config`."""
    import atf_cdk  # noqa: F401  (quiets jsii's Node banner before aws_cdk loads)
    from atf_cdk.stack import AtfStack
    from aws_cdk import App

    with tempfile.TemporaryDirectory(prefix="atf-cdk-out-") as outdir:
        app = App(context=cdk_context(LOCAL_ENVIRONMENT), outdir=outdir)
        stack = AtfStack(app, config.name, local_props(config))
        app.synth()
        return flatten(Path(outdir), stack)


def answer(request: dict[str, Any]) -> dict[str, Any]:
    """Writes the requested template (whole, by a rename) and says who did, or what went wrong."""
    try:
        template = synthesize(StackConfig.model_validate_json(request["config"]))
        output = Path(request["output"])
        partial = output.with_name(f".{output.name}.{os.getpid()}")
        partial.write_text(json.dumps(template))
        os.replace(partial, output)  # two services of two checkouts may write the same file: each a whole one
        return {"pid": os.getpid(), "error": None}
    except Exception:  # noqa: BLE001  (whatever the synthesis raised is the caller's error to read)
        return {"pid": os.getpid(), "error": traceback.format_exc()}


def serve(address: Path, lock_path: Path, idle_seconds: float, most_requests: int) -> None:
    """Listens at `address`, then goes on in a child of its own, and the process that started it ends: its
    starter knows by the exit that it can connect. The service answers requests until idle for
    `idle_seconds`, after `most_requests`, or when asked to stop. Where another service holds the lock,
    this one ends at once: that one listens at `address`, or is ending and the starter tries again."""
    lock = open(lock_path, "a")  # noqa: SIM115  (held open, and so locked, for the service's life)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return
    address.unlink(missing_ok=True)  # left by a service that was killed: nothing listens on it
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(address))
    listener.listen(16)
    if os.fork():  # no thread and no aws-cdk-lib yet: a plain fork
        os._exit(0)
    signal.signal(signal.SIGTERM, _ended)  # so the `finally` below runs: no address left that nothing serves
    listener.settimeout(idle_seconds)
    try:
        _answer_until_done(listener, most_requests)
    finally:
        address.unlink(missing_ok=True)  # before the lock goes: the next service binds anew
        listener.close()
        lock.close()


def _ended(*_: object) -> None:
    raise SystemExit(0)


def _answer_until_done(listener: socket.socket, most_requests: int) -> None:
    answered = 0
    while answered < most_requests:
        try:
            connection, _address = listener.accept()
        except TimeoutError:
            return
        with connection, contextlib.suppress(OSError):  # a caller that went away takes its answer with it
            request = receive_line(connection)
            if request is None or "ping" in request:  # a connection closed at once; a question of who listens
                send_line(connection, {"pid": os.getpid(), "error": None})
                continue
            if "stop" in request:
                send_line(connection, {"pid": os.getpid(), "error": None})
                return
            send_line(connection, answer(request))
            answered += 1


if __name__ == "__main__":
    serve(Path(sys.argv[1]), Path(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4]))
