"""Which child of its parents each child is: the k-th child an operator makes from the same parents, counted over
the whole search (``OperatorContext.rank``), so an LLM planner asks a parent for its k-th best idea -- every rank
once, a new parent's best idea first -- whatever slot the child has.

Child n takes its rank when it has drawn its operator and parents (its first draw; a draw again, after it made a
kernel that already existed, is told so and keeps the count of its first), after child n - 1 has taken its own and
reserved its LLM calls (``ready``): so the ranks, and the calls a budget has left, follow the children's order, not
the order in which threads run, and a rerun or a resume asks the same.
The counts of the children folded in are kept in the checkpoint (``Checkpoint.ranks``); a resume remakes the children
after it with the ranks they had.
"""
from __future__ import annotations

import threading
from collections import Counter


def rank_key(operator: str, parents) -> str:
    """What a rank is counted per: the operator and its parents' ids."""
    return f"{operator}:{','.join(parent.id for parent in parents)}"


class ParentRanks:
    def __init__(self, counts: dict | None = None, first: int = 0):
        """`counts`: key -> children of the children before `first` (a checkpoint's); those from `first` on take
        theirs here."""
        self._counts = Counter(counts or {})
        self._first = first
        self._taken: dict[int, str | None] = {}  # child n (>= first) -> the key of its first draw (None: no draw)
        self._ready: set[int] = set()  # children (>= first) that reserved what their operator needs (``ready``)
        self._lock = threading.Condition()

    def rank(self, n: int, key: str, first_draw: bool) -> int:
        """Child n's rank for `key`: 1 + the children before it counted under `key`; with `first_draw`, n is counted
        too. Waits for child n - 1 to take its own and to have reserved what its operator needs (``ready``): so the
        children reserve in their order, and the last calls of a budget go to the ranks in their order."""
        with self._lock:
            while n - 1 >= self._first and (n - 1 not in self._taken or n - 1 not in self._ready):
                self._lock.wait()
            rank = 1 + self._counts[key] + sum(1 for m, taken in self._taken.items() if m < n and taken == key)
            if first_draw and n not in self._taken:
                self._taken[n] = key
                self._lock.notify_all()
            return rank

    def ready(self, n: int) -> None:
        """Child n reserved what its operator needs (its LLM calls), or found it cannot, or its operator returned."""
        with self._lock:
            if n >= self._first and n not in self._ready:
                self._ready.add(n)
                self._lock.notify_all()

    def skip(self, n: int) -> None:
        """Child n drew nothing (the search stopped first, or it never began): the children after it need not wait."""
        with self._lock:
            if n >= self._first and (n not in self._taken or n not in self._ready):
                self._taken.setdefault(n, None)
                self._ready.add(n)
                self._lock.notify_all()

    def fold(self, n: int) -> None:
        """Child n is folded in: its draw joins the counts a checkpoint keeps."""
        with self._lock:
            key = self._taken.pop(n, None)
            self._ready.discard(n)
            if key is not None:
                self._counts[key] += 1
            self._first = max(self._first, n + 1)

    @property
    def counts(self) -> dict:
        """key -> children counted under it, of the children folded in (what a checkpoint keeps)."""
        with self._lock:
            return dict(self._counts)
