"""The committed copy of the OpenAPI document, functions/frontend/openapi.json.

`python -m functions.frontend.openapi_file` rewrites it from the handler's routes;
tests/api/test_openapi.py fails when the copy and the live document differ. (A module
of its own: it imports the handler, which imports openapi_doc for its route helpers.)
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from aws_lambda_powertools.event_handler import APIGatewayRestResolver

from functions.frontend.openapi_doc import document

COMMITTED = Path(__file__).with_name("openapi.json")


def render(app: APIGatewayRestResolver) -> str:
    return json.dumps(document(app), indent=2, sort_keys=True) + "\n"


def main() -> None:
    from functions.frontend.handler import app

    COMMITTED.write_text(render(app))
    print(f"wrote {COMMITTED}", file=sys.stderr)


if __name__ == "__main__":
    main()
