"""Who may call which route of the API: every route, the kind of permission it needs, and for which lambdas.

One table (ROUTES), read by the frontend's OpenAPI document (each operation's `x-atf-permission`, and a test
that the handler serves exactly these routes), the CDK's API resources (through that document), the CDK grant
helpers (AtfEnvironment.grant_use / grant_operate) and the SDK's paths. On AWS, API Gateway authorizes every
request as `execute-api:Invoke` on `arn:aws:execute-api:{region}:{account}:{api_id}/{stage}/{METHOD}/{path}`,
so a route whose path names the lambda lets a plain IAM statement grant one lambda and not another.

Two kinds of permission per lambda:
- use: schedule its tasks, read them, its statistics and dead letters;
- operate: everything that changes what runs: gates, cancel, change and bulk changes, redrive and discard,
  periodic schedules, chains.

A route is either scoped (its path holds `{lambda_name}`: `/v1/lambdas/{lambda_name}/...`) or for all lambdas
(the older paths, `/v1/tasks/{task_id}` and the like, which do not name the lambda): only a principal granted
every lambda may call those, but for the spanning ones. A spanning route (a batch, a chain: each item names its
own lambda) is open in IAM to any principal granted its kind on at least one lambda; the frontend then checks
each item's lambda against the caller's identity (functions/frontend/spanning.py) as IAM would check the
item's scoped twin, `/v1/lambdas/{item's lambda}/...`, and refuses the whole request naming the lambda.

IAM's `*` spans `/`, so a grant never writes a lambda as `*`: "every lambda" is the list of the stack's lambdas
by name (see `grant_patterns`), and within a lambda no pattern of one kind matches a route of the other
(tests/unit/test_access.py proves both over every route of the OpenAPI document).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

Kind = Literal["use", "operate"]
KINDS: tuple[Kind, ...] = ("use", "operate")
LAMBDA_PARAMETER = "lambda_name"
SCOPED_PREFIX = "/v1/lambdas/{lambda_name}"
_PARAMETER = re.compile(r"\{([a-z_]+)\}")


@dataclass(frozen=True)
class Route:
    """One operation of the API: `path` as the OpenAPI document writes it (`{parameter}`)."""

    method: str
    path: str
    kind: Kind
    spanning: bool = False

    @property
    def scoped(self) -> bool:
        """Whether the path names the lambda, so an IAM statement can grant it for one lambda."""
        return self.path.startswith(f"{SCOPED_PREFIX}/")

    @property
    def parameters(self) -> tuple[str, ...]:
        return tuple(_PARAMETER.findall(self.path))

    def resolver_path(self) -> str:
        """The path as Powertools' resolver declares it (`<parameter>`)."""
        return _PARAMETER.sub(r"<\1>", self.path)

    def resource_path(self, lambda_name: str) -> str:
        """The path part of the execute-api ARN that grants this route for one lambda: the lambda by name,
        every other parameter `*` (IAM's wildcard, which spans "/"; the test shows it stays inside the route)."""
        if not self.scoped:
            raise ValueError(f"{self.method} {self.path} does not name a lambda")
        named = self.path.replace("{" + LAMBDA_PARAMETER + "}", lambda_name)
        return _PARAMETER.sub("*", named)

    def all_lambdas_resource_path(self) -> str:
        """The path part of the ARN that grants an all-lambdas route (its parameters `*`)."""
        return _PARAMETER.sub("*", self.path)

    def twin(self) -> Route:
        """A spanning route's scoped twin: the route each item's lambda is checked against."""
        if not self.spanning:
            raise ValueError(f"{self.method} {self.path} does not span lambdas")
        return route(self.method, SCOPED_PREFIX + self.path.removeprefix("/v1"))

    def build(self, **values: str) -> str:
        """A concrete path, each parameter given by name (the caller escapes them into one segment each)."""
        missing = [p for p in self.parameters if p not in values]
        if missing:
            raise ValueError(f"{self.method} {self.path} needs {', '.join(missing)}")
        return _PARAMETER.sub(lambda m: values[m.group(1)], self.path)


def _lambda(method: str, path: str, kind: Kind) -> Route:
    return Route(method, f"{SCOPED_PREFIX}{path}", kind)


# Every route the frontend serves and documents (GET /v1/openapi.json, undocumented, needs no lambda's
# permission: every grant of either kind allows it, so any principal allowed to call the API may read it).
DOCUMENT = ("GET", "/v1/openapi.json")
# The methods whose body API Gateway's request validator checks against the JSON object model (the CDK attaches
# it, the local API server checks alike).
WITH_BODY = ("POST", "PUT")
ROUTES: tuple[Route, ...] = (
    # One lambda's routes.
    _lambda("POST", "/tasks", "use"),
    _lambda("POST", "/tasks/batch", "use"),
    _lambda("GET", "/tasks/{task_id}", "use"),
    _lambda("GET", "/stats", "use"),
    _lambda("GET", "/dead-letters", "use"),
    _lambda("DELETE", "/tasks/{task_id}", "operate"),
    _lambda("POST", "/tasks/{task_id}/change", "operate"),
    _lambda("POST", "/tasks/bulk/cancel", "operate"),
    _lambda("POST", "/tasks/bulk/reschedule", "operate"),
    _lambda("POST", "/tasks/bulk/reprioritise", "operate"),
    _lambda("PUT", "/gates", "operate"),
    _lambda("DELETE", "/gates", "operate"),
    _lambda("PUT", "/gates/{collection}", "operate"),
    _lambda("DELETE", "/gates/{collection}", "operate"),
    _lambda("POST", "/dead-letters/redrive", "operate"),
    _lambda("POST", "/dead-letters/discard", "operate"),
    _lambda("GET", "/schedules", "operate"),
    _lambda("PUT", "/schedules/{name}", "operate"),
    _lambda("GET", "/schedules/{name}", "operate"),
    _lambda("DELETE", "/schedules/{name}", "operate"),
    _lambda("POST", "/schedules/{name}/pause", "operate"),
    _lambda("POST", "/schedules/{name}/resume", "operate"),
    _lambda("POST", "/chains", "operate"),
    _lambda("GET", "/chains/{chain_id}", "operate"),
    _lambda("DELETE", "/chains/{chain_id}", "operate"),
    _lambda("POST", "/chains/{chain_id}/links/{link}/retry", "operate"),
    # All lambdas' routes: the path does not name one lambda (a task or chain id, a selection, a list).
    Route("POST", "/v1/tasks", "use"),
    Route("POST", "/v1/tasks/batch", "use", spanning=True),
    Route("GET", "/v1/tasks/{task_id}", "use"),
    Route("DELETE", "/v1/tasks/{task_id}", "operate"),
    Route("POST", "/v1/tasks/{task_id}/change", "operate"),
    Route("POST", "/v1/tasks/bulk/cancel", "operate"),
    Route("POST", "/v1/tasks/bulk/reschedule", "operate"),
    Route("POST", "/v1/tasks/bulk/reprioritise", "operate"),
    Route("GET", "/v1/gates", "operate"),
    Route("PUT", "/v1/gates/{lambda_name}", "operate"),
    Route("DELETE", "/v1/gates/{lambda_name}", "operate"),
    Route("PUT", "/v1/gates/{lambda_name}/{collection}", "operate"),
    Route("DELETE", "/v1/gates/{lambda_name}/{collection}", "operate"),
    Route("GET", "/v1/schedules", "operate"),
    Route("PUT", "/v1/schedules/{name}", "operate"),
    Route("GET", "/v1/schedules/{name}", "operate"),
    Route("DELETE", "/v1/schedules/{name}", "operate"),
    Route("POST", "/v1/schedules/{name}/pause", "operate"),
    Route("POST", "/v1/schedules/{name}/resume", "operate"),
    Route("POST", "/v1/chains", "operate", spanning=True),
    Route("GET", "/v1/chains/{chain_id}", "operate"),
    Route("DELETE", "/v1/chains/{chain_id}", "operate"),
    Route("POST", "/v1/chains/{chain_id}/links/{link}/retry", "operate"),
)
_BY_KEY = {(r.method, r.path): r for r in ROUTES}


def route(method: str, path: str) -> Route:
    """The route of a method and OpenAPI path; KeyError naming it when the table lacks it."""
    try:
        return _BY_KEY[(method.upper(), path)]
    except KeyError:
        raise KeyError(f"{method.upper()} {path} is not in atf_core.access.ROUTES: give it a kind there") from None


def scoped(method: str, path: str) -> Route:
    """The one-lambda route at `/v1/lambdas/{lambda_name}` + path."""
    return route(method, f"{SCOPED_PREFIX}{path}")


def grant_patterns(kind: Kind, lambdas: Iterable[str], every_lambda: bool) -> list[tuple[str, str]]:
    """(method, resource path) of each route a grant of `kind` on `lambdas` allows, as the execute-api ARN
    writes them after the stage (`POST`, `/v1/lambdas/send_email/tasks`). With every_lambda, `lambdas` must be
    all of the stack's lambdas, and the grant also allows the all-lambdas routes of that kind. A grant of at
    least one lambda also allows the spanning routes of its kind (the frontend checks their items), and the
    API's OpenAPI document."""
    names = sorted(set(lambdas))
    found = [(r.method, r.resource_path(n)) for n in names for r in ROUTES if r.scoped and r.kind == kind]
    others = [r for r in ROUTES if not r.scoped and r.kind == kind and (every_lambda or (r.spanning and names))]
    document = [DOCUMENT] if names else []
    return found + [(r.method, r.all_lambdas_resource_path()) for r in others] + document
