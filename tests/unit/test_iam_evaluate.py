"""IAM's decision, as the local API server and the local policy simulator make it (atf_local.iam.evaluate)."""

from __future__ import annotations

import fnmatch
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from atf_local.iam.evaluate import (
    ALLOWED,
    EXPLICIT_DENY,
    IMPLICIT_DENY,
    Policy,
    action_matches,
    evaluate,
    resource_matches,
)

ACTION = "execute-api:Invoke"
API = "arn:aws:execute-api:us-east-1:123456789012:api1"


def policy(*statements: dict[str, Any], name: str = "p") -> Policy:
    return Policy(name, "user", {"Version": "2012-10-17", "Statement": list(statements)})


def allow(resource: Any, action: Any = ACTION, **more: Any) -> dict[str, Any]:
    return {"Effect": "Allow", "Action": action, "Resource": resource, **more}


def deny(resource: Any, action: Any = ACTION, **more: Any) -> dict[str, Any]:
    return {"Effect": "Deny", "Action": action, "Resource": resource, **more}


def decide(policies: list[Policy], resource: str, action: str = ACTION) -> str:
    return evaluate(policies, action, resource).decision


def test_nothing_granted_is_an_implicit_deny() -> None:
    assert decide([], f"{API}/prod/GET/v1/tasks") == IMPLICIT_DENY
    assert decide([policy(allow("*", "sqs:*"))], f"{API}/prod/GET/v1/tasks") == IMPLICIT_DENY


def test_an_allow_on_the_route_allows_it_and_names_its_statement() -> None:
    grant = policy(allow(f"{API}/*/GET/v1/lambdas/demo/*"), name="team")
    decision = evaluate([grant], ACTION, f"{API}/prod/GET/v1/lambdas/demo/tasks/t1")
    assert decision.decision == ALLOWED
    assert [(m.policy.id, m.index) for m in decision.matched] == [("team", 0)]
    assert decide([grant], f"{API}/prod/POST/v1/tasks") == IMPLICIT_DENY
    assert decide([grant], f"{API}/prod/POST/v1/lambdas/demo/tasks") == IMPLICIT_DENY


def test_an_explicit_deny_beats_any_allow_in_any_policy() -> None:
    resource = f"{API}/prod/POST/v1/lambdas/demo/tasks"
    decision = evaluate([policy(allow("*", "*")), policy(deny(f"{API}/*/POST/*"), name="guard")], ACTION, resource)
    assert decision.decision == EXPLICIT_DENY
    assert [m.policy.id for m in decision.matched] == ["guard"]
    assert decide([policy(allow("*", "*"), deny(f"{API}/*/GET/*"))], resource) == ALLOWED


def test_actions_compare_without_case_and_with_wildcards() -> None:
    assert action_matches("execute-api:invoke", ACTION)
    assert action_matches("EXECUTE-API:*", ACTION)
    assert action_matches("execute-api:Inv?ke", ACTION)
    assert action_matches("*", ACTION)
    assert not action_matches("execute-api:InvokeX", ACTION)
    assert not action_matches("execute-api:ManageConnections", ACTION)
    assert decide([policy(allow("*", ["sqs:SendMessage", "execute-api:*"]))], f"{API}/x/GET/y") == ALLOWED


def test_resources_compare_with_case() -> None:
    assert not resource_matches(f"{API}/prod/get/v1/tasks", f"{API}/prod/GET/v1/tasks")
    assert not resource_matches(f"{API}/prod/GET/v1/lambdas/Demo/*", f"{API}/prod/GET/v1/lambdas/demo/tasks")


def test_a_star_spans_slashes_in_the_resource_part() -> None:
    assert resource_matches(f"{API}/*", f"{API}/prod/POST/v1/lambdas/a/tasks/t1/change")
    assert resource_matches(f"{API}/*/POST/v1/lambdas/a/*", f"{API}/prod/POST/v1/lambdas/a/tasks/t1/change")
    # lambda a's pattern never names lambda ab's routes, a question mark is one character
    assert not resource_matches(f"{API}/*/POST/v1/lambdas/a/*", f"{API}/prod/POST/v1/lambdas/ab/tasks")
    assert resource_matches(f"{API}/prod/GET/v1/tasks/t?", f"{API}/prod/GET/v1/tasks/t1")
    assert not resource_matches(f"{API}/prod/GET/v1/tasks/t?", f"{API}/prod/GET/v1/tasks/t12")


def test_a_wildcard_stays_in_its_arn_segment_unless_it_ends_it() -> None:
    resource = f"{API}/prod/GET/v1/tasks"
    assert resource_matches("arn:aws:execute-api:*:*:api1/*", resource)
    assert resource_matches("arn:aws:execute-api:*", resource)  # a segment's final * runs on
    assert not resource_matches("arn:aws:execute-api:us-*-1x:*", resource)
    assert not resource_matches("arn:aws:execute-api:u*1:123456789012:api2/*", resource)
    assert not resource_matches("arn:aws:execute-api:us-east-1:1*2:api1/*", "arn:aws:execute-api:us-east-1:1:2:api1/x")


def test_not_action_and_not_resource() -> None:
    resource = f"{API}/prod/DELETE/v1/lambdas/a/tasks/t1"
    assert decide([policy({"Effect": "Allow", "NotAction": "sqs:*", "Resource": "*"})], resource) == ALLOWED
    assert (
        decide([policy({"Effect": "Allow", "NotAction": "execute-api:*", "Resource": "*"})], resource) == IMPLICIT_DENY
    )
    everything_but_deletes = {"Effect": "Allow", "Action": ACTION, "NotResource": f"{API}/*/DELETE/*"}
    assert decide([policy(everything_but_deletes)], resource) == IMPLICIT_DENY
    assert decide([policy(everything_but_deletes)], f"{API}/prod/GET/v1/tasks") == ALLOWED
    no_deletes = {"Effect": "Deny", "Action": ACTION, "NotResource": f"{API}/*/GET/*"}
    assert decide([policy(allow("*"), no_deletes)], resource) == EXPLICIT_DENY


def test_a_condition_never_proves_an_allow_and_always_denies() -> None:
    resource = f"{API}/prod/GET/v1/tasks"
    condition = {"Condition": {"IpAddress": {"aws:SourceIp": "10.0.0.0/8"}}}
    assert decide([policy(allow("*", **condition))], resource) == IMPLICIT_DENY
    assert decide([policy(allow("*"), deny("*", **condition))], resource) == EXPLICIT_DENY


def test_a_single_statement_object_and_single_strings_are_taken() -> None:
    document = {"Version": "2012-10-17", "Statement": allow(f"{API}/*")}
    assert decide([Policy("p", "role", document)], f"{API}/prod/GET/v1/tasks") == ALLOWED


def test_statements_without_action_or_resource_match_nothing() -> None:
    resource = f"{API}/prod/GET/v1/tasks"
    assert decide([policy({"Effect": "Allow", "Resource": "*"})], resource) == IMPLICIT_DENY
    assert decide([policy({"Effect": "Allow", "Action": "*"})], resource) == IMPLICIT_DENY
    assert decide([policy({"Effect": "Maybe", "Action": "*", "Resource": "*"})], resource) == IMPLICIT_DENY


# -- properties --------------------------------------------------------------------------------------

_SEGMENT = st.text(alphabet="abcdAB_-.", min_size=1, max_size=6)
_PATHS = st.lists(_SEGMENT, min_size=1, max_size=5).map("/".join)
_METHODS = st.sampled_from(["GET", "POST", "PUT", "DELETE"])


@st.composite
def _pattern_for(draw: st.DrawFn, path: str) -> str:
    """A pattern over the resource part: some of the path's characters replaced by * or ?, or another path."""
    chars = list(draw(st.one_of(st.just(path), _PATHS)))
    for index in draw(st.lists(st.integers(0, max(len(chars) - 1, 0)), max_size=3)):
        if index < len(chars):
            chars[index] = draw(st.sampled_from(["*", "?", "**"]))
    return "".join(chars)


@given(st.data(), _PATHS)
def test_in_the_resource_part_wildcards_match_as_shell_patterns_do(data: st.DataObject, path: str) -> None:
    # fnmatchcase: * spans anything, "/" included, ? is one character; no [ ] in these patterns
    pattern = data.draw(_pattern_for(path))
    expected = fnmatch.fnmatchcase(path, pattern)
    assert resource_matches(f"{API}/{pattern}", f"{API}/{path}") is expected


@given(_METHODS, _PATHS, _PATHS, st.booleans(), st.booleans())
def test_a_matching_deny_always_wins_and_order_never_matters(
    method: str, path: str, denied: str, allow_all: bool, deny_first: bool
) -> None:
    resource = f"{API}/prod/{method}/{path}"
    grants = [policy(allow(f"{API}/*" if allow_all else resource)), policy(deny(f"{API}/*/{method}/{denied}"))]
    decision = decide(grants[::-1] if deny_first else grants, resource)
    if denied == path:
        assert decision == EXPLICIT_DENY
    else:
        assert decision == ALLOWED


@given(_METHODS, _PATHS, st.lists(st.tuples(st.booleans(), _PATHS), max_size=4))
def test_allowed_only_when_some_allow_matches_and_no_deny_does(
    method: str, path: str, statements: list[tuple[bool, str]]
) -> None:
    resource = f"{API}/prod/{method}/{path}"
    built = [(allow if is_allow else deny)(f"{API}/*/{method}/{p}") for is_allow, p in statements]
    allows = any(is_allow and p == path for is_allow, p in statements)
    denies = any(not is_allow and p == path for is_allow, p in statements)
    expected = EXPLICIT_DENY if denies else (ALLOWED if allows else IMPLICIT_DENY)
    assert decide([policy(*built)] if built else [], resource) == expected


# -- how the SDK reads API Gateway's refusals ----------------------------------------------------------


def test_an_iam_refusal_is_access_denied_however_the_gateway_words_it() -> None:
    from atf_core.errors import AccessDenied, MissingAuthentication, from_wire

    denied = "User: arn:aws:iam::1:user/a is not authorized to perform: execute-api:Invoke on resource: arn:x"
    # reshaped by the deployed API's GatewayResponse; by one deployed before it had AccessDenied; raw
    for body in ({"code": "access_denied", "message": denied}, {"code": "missing_authentication", "message": denied}):
        assert type(from_wire(403, body)) is AccessDenied
    assert type(from_wire(403, {"Message": denied})) is AccessDenied
    error = from_wire(403, {"message": "The security token included in the request is invalid."})
    assert type(error) is MissingAuthentication and error.status == 403
    assert type(from_wire(403, {"code": "missing_authentication", "message": "Missing Authentication Token"})) is (
        MissingAuthentication
    )
