"""Records read back (a run's summary, a checkpoint, a stored verdict, a worker's result, a bench row): one rule for
every reader, ``from_record``.

The rule: the fields the record's class knows are taken; a field the data lacks (written by an older version) gets
its default; a key the class has no field for (written by a newer version, or an older one that had it) is dropped
with a logged note naming it and where it was read. A record written by this very code (``own=True``: a worker's
result, made by the same install a moment ago) has no other version: a key it does not know is a bug, refused by
name.
"""
from __future__ import annotations

import logging
from dataclasses import fields
from typing import TypeVar

T = TypeVar("T")

log = logging.getLogger(__name__)  # already under the kernelevo logger (the project's namespace)


def from_record(cls: type[T], data: dict, where: str = "a record", *, own: bool = False) -> T:
    """The dataclass `cls` from `data` by the rule above; `where` names the record in the note (or the error)."""
    known = [f.name for f in fields(cls)]
    unknown = sorted(set(data) - set(known))
    if unknown and own:
        raise ValueError(f"{where} has keys {unknown} that this kernelevo does not know (known: {sorted(known)}): "
                         f"add them to {cls.__name__}")
    if unknown:
        log.info("note: %s has fields this kernelevo version does not know (%s), left out: written by another "
                 "version", where, ", ".join(unknown))
    return cls(**{name: data[name] for name in known if name in data})
