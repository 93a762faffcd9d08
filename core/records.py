"""Records read back from JSON (a run's summary, a worker's result): built only from the fields they know."""
from __future__ import annotations

from dataclasses import fields
from typing import Callable, TypeVar

T = TypeVar("T")


def from_known_fields(cls: type[T], data: dict, refusal: Callable[[list[str], list[str]], str]) -> T:
    """``cls(**data)`` for a dataclass `cls`; a key it has no field for raises ValueError with
    ``refusal(unknown, known)`` (both sorted) instead of being dropped: a reader of another version says so."""
    known = sorted(f.name for f in fields(cls))
    unknown = sorted(set(data) - set(known))
    if unknown:
        raise ValueError(refusal(unknown, known))
    return cls(**data)
