# A worker host image: the framework's SDK plus a lambda owner's callbacks.
#
# Build from the repository root (the SDK and core are installed from this checkout):
#   docker build -f examples/worker.Dockerfile -t atf-workers:examples-1 .
# Your own image, in your own repository, installs the framework's packages instead of copying its
# tree: see examples/team-project/Dockerfile (and the README's "Writing a lambda in your own repository").
#
# The Python the tests run on and the Lambda runtime's (3.11), and every package at the
# version of requirements.lock, which the tests install too.
FROM public.ecr.aws/docker/library/python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

# The framework: atf-core and atf-sdk with its worker extra (Powertools; atf-sdk alone is the client)
# from the checkout, their dependencies at the locked versions.
COPY requirements.lock /tmp/atf/
COPY layers/ /tmp/atf/layers/
COPY sdk/ /tmp/atf/sdk/
RUN pip install --constraint /tmp/atf/requirements.lock /tmp/atf/layers "/tmp/atf/sdk[worker]" && rm -rf /tmp/atf

# Your callbacks and what they need. The worker resolves module:attribute from its working directory.
WORKDIR /app
# COPY requirements.txt .
# RUN pip install -r requirements.txt   (pin them too: what your tests ran is what should ship)
COPY examples/__init__.py examples/lambdas.py ./examples/

# No root at run time; the host needs no writable path besides /tmp.
RUN useradd --system --uid 10001 --no-create-home worker
USER 10001

# ECS sends SIGTERM on stop and waits the task definition's stopTimeout (120 s in this
# framework's CDK app) before SIGKILL: the host stops taking tasks and finishes the ones it holds.
STOPSIGNAL SIGTERM
# Unhealthy once a receiver or an executor pool of the host is dead for good: the probe reads the report the
# host rewrites every 2 s (at $ATF_HEALTH_FILE, default /tmp/atf-worker-health.json), and makes no AWS call.
# The start period covers the host's start; ECS runs the same check from the task definition (atf_cdk).
HEALTHCHECK --interval=30s --timeout=10s --start-period=90s --retries=3 CMD ["python", "-m", "atf_sdk.worker.health"]
# One image may serve several lambdas: each ECS service sets ATF_LAMBDA to the lambdas it serves
# (comma-separated), and `atf worker` serves those by default. `--only <lambda>` (repeatable), in the
# service's "command", overrides it; without either, a host serves every lambda of the registry.
CMD ["atf", "worker", "examples.lambdas:lambdas"]
