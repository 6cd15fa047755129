"""A wrong-typed value is shown in its refusal as JSON, cut to 40 characters, and encoded no further."""

from __future__ import annotations

from atf_core.schema import not_as_expected


def test_a_short_value_is_shown_whole_and_a_long_one_cut() -> None:
    assert not_as_expected("a number", "5") == 'must be a number, not a string ("5")'
    exactly_forty = "x" * 38  # with its quotes
    assert not_as_expected("a number", exactly_forty).endswith(f'("{exactly_forty}")')
    shown = not_as_expected("a number", list(range(1_000)))
    assert shown == "must be a number, not an array ([0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11...)"


def test_a_large_value_is_encoded_only_as_far_as_its_refusal_shows() -> None:
    # Given an array of 100,000 values, each counting the times it is written out
    written: list[int] = []

    class Counted:
        def __repr__(self) -> str:
            written.append(1)
            return "v"

    # When it is refused
    message = not_as_expected("a JSON object", [Counted() for _ in range(100_000)])

    # Then only the values its 40 characters show were written
    assert message == 'must be a JSON object, not an array (["v", "v", "v", "v", "v", "v", "v", "...)'
    assert len(written) < 20
