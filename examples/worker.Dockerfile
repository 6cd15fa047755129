# A worker host image: the framework's SDK plus a lambda owner's callbacks.
#
# Build from the repository root (the SDK and core are installed from this checkout):
#   docker build -f examples/worker.Dockerfile -t atf-workers:examples-1 .
# Your own image: copy this file, replace the COPY of examples/ with your package
# (and its requirements), and point CMD at your registry: `atf worker your.module:lambdas`.
#
# The Python the tests run on and the Lambda runtime's (3.11), and every package at the
# version of requirements.lock, which the tests install too.
FROM public.ecr.aws/docker/library/python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

# The framework: atf-core and atf-sdk from the checkout, their dependencies at the locked versions.
COPY requirements.lock /tmp/atf/
COPY layers/ /tmp/atf/layers/
COPY sdk/ /tmp/atf/sdk/
RUN pip install --constraint /tmp/atf/requirements.lock /tmp/atf/layers /tmp/atf/sdk && rm -rf /tmp/atf

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
# One image may serve several lambdas; each ECS service passes its own `--only <lambda>`
# (the "command" of its worker settings) or sets ATF_LAMBDA for an image that reads it.
CMD ["atf", "worker", "examples.lambdas:lambdas"]
