"""Read CloudWatch EMF documents back out of captured output."""

from __future__ import annotations

import json
from dataclasses import dataclass


@dataclass(frozen=True)
class Point:
    name: str
    unit: str
    dimensions: dict[str, str]
    values: tuple[float, ...]

    @property
    def total(self) -> float:
        return sum(self.values)


def points(output: str) -> list[Point]:
    """Every metric of every EMF document (a JSON line with an `_aws` key) in the output."""
    found = []
    for line in output.splitlines():
        if not line.startswith("{") or '"_aws"' not in line:
            continue
        document = json.loads(line)
        (directive,) = document["_aws"]["CloudWatchMetrics"]
        (names,) = directive["Dimensions"]
        dimensions = {name: document[name] for name in names}
        for metric in directive["Metrics"]:
            value = document[metric["Name"]]
            values = tuple(value) if isinstance(value, list) else (value,)
            found.append(Point(metric["Name"], metric["Unit"], dimensions, values))
    return found


def named(output: str, name: str, **dimensions: str) -> list[Point]:
    """The points of one metric whose dimensions include these."""
    return [p for p in points(output) if p.name == name and dimensions.items() <= p.dimensions.items()]
