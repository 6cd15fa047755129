"""How the frontend writes a JSON response body: given to the resolver, and used where a route must know
how many bytes its answer takes (a page of schedules) before the resolver writes it."""

from __future__ import annotations

import json
from functools import partial

from aws_lambda_powertools.shared.json_encoder import Encoder

# Powertools' own default, made explicit so that what measures a body and what writes it are one function:
# compact, non-ASCII escaped as \uXXXX (what a 6 MiB response limit is counted in).
write_body = partial(json.dumps, separators=(",", ":"), cls=Encoder)
