"""A JSON text whose object gives a name twice is refused, naming its place, as a validation error would be
named; one that does not is read as Python's reader reads it."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from atf_core.errors import field_path
from atf_core.schema import NameGivenTwice, decode_json


@pytest.mark.parametrize(
    ("text", "place"),
    [
        ('{"a": 1, "a": 2}', "a"),
        ('{"tasks": [{"lambda": "w"}, {"lambda": "w", "x": 1, "lambda": "m"}]}', "tasks[1].lambda"),
        ('{"payload": {"a": [{"n": 1, "n": 2}]}}', "payload.a[0].n"),
        ('[{"x": 1}, {"y": [{"z": 1, "z": 1}]}]', "[1].y[0].z"),
        ('{"b": {"c": 1, "c": 2}, "b": 3}', "b"),  # the outer object's own, though the inner is read first
    ],
)
def test_a_name_given_twice_is_refused_naming_its_place(text: str, place: str) -> None:
    with pytest.raises(NameGivenTwice) as refused:
        decode_json(text)
    assert field_path(refused.value.loc) == place
    assert isinstance(refused.value, ValueError), "what any text that is not JSON raises"


def test_names_given_once_read_as_usual_and_the_check_can_be_left_to_another() -> None:
    assert decode_json('{"a": {"b": [1, {"c": null}]}, "d": "e"}') == {"a": {"b": [1, {"c": None}]}, "d": "e"}
    assert decode_json('{"a": 1, "a": 2}', unique_names=False) == {"a": 2}
    with pytest.raises(ValueError, match="NaN"):
        decode_json('{"a": NaN}', unique_names=False)


def test_readers_in_threads_do_not_see_each_others_names() -> None:
    texts = ['{"a": 1, "a": 2}', '{"a": 1, "b": 2}'] * 500

    def refused(text: str) -> bool:
        try:
            decode_json(text)
        except NameGivenTwice:
            return True
        return False

    with ThreadPoolExecutor(8) as pool:
        assert list(pool.map(refused, texts)) == [True, False] * 500
