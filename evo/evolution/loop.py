"""The steady-state loop: children dispatched as slots free, folded into the state strictly in their order.

There is no generation barrier. Child ``n`` (0, 1, 2, ... after generation 0) may start when a slot is free (a
child that finished and waits to be folded in holds none) and the children before
``n - staleness + 1`` are folded in, and it is made from the state as it stood at exactly that point (bounded
staleness): never from a fresher one, even when it starts later. Children finish in any order; each is folded in
only after every child before it. So what a child is made from, and what the search keeps, depends on the config,
the seed and the measurements, never on how many children run at once or which finishes first -- with one child in
flight or many, the lineage is the same (only the wall time differs).

Two kinds of stop:

* ``ended(n)``: whether the search ends before child ``n`` (its generation is past the budget, no improvement for
  ``patience`` generations): a function of the folded state, asked before a child starts and again before it is
  folded in, so a child that started before the end was known is dropped, whatever the timing.
* ``spent()``: a resource ran out (wall time, evaluations, an operator's budget): no child starts any more; those in
  flight finish (at a wall-time deadline the evaluation service cuts their evaluations, running ones killed) and
  are folded in.

The pieces are injected (DEAP's style of small algorithms over a toolbox): ``start(n)`` returns a future of child
``n``'s result, ``fold(n, result)`` folds it into the state.
"""
from __future__ import annotations

from concurrent.futures import FIRST_COMPLETED, Future, wait
from dataclasses import dataclass
from typing import Any, Callable


@dataclass
class LoopPieces:
    start: Callable[[int], Future]  # make, tune and record child n from the state its window allows
    fold: Callable[[int, Any], None]  # fold child n's result into the state (in index order)
    ended: Callable[[int], str]  # why the search ends before child n ("" when it does not)
    spent: Callable[[], str]  # which resource budget is spent ("" when none)


def steady_state(pieces: LoopPieces, first: int, in_flight: int, staleness: int) -> str:
    """Run children from `first` until a stop; returns its reason. `first` children are folded in already."""
    if in_flight < 1 or staleness < 1:
        raise ValueError(f"children in flight and staleness must be at least 1, got {in_flight}, {staleness}")
    pending: dict[int, Future] = {}
    folded, following, stop = first, first, ""
    try:
        while True:
            while not stop and _running(pending) < in_flight and following - staleness < folded:
                stop = pieces.ended(following) or pieces.spent()
                if not stop:
                    pending[following] = pieces.start(following)
                    following += 1
            if not pending:
                return stop
            wait(list(pending.values()), return_when=FIRST_COMPLETED)
            while folded in pending and pending[folded].done():
                result = pending.pop(folded).result()
                ended = pieces.ended(folded)
                if ended:  # started before the end was known: dropped, and every later child with it
                    stop = ended
                    _drop(pending)
                    break
                pieces.fold(folded, result)
                folded += 1
    except BaseException:
        _drop(pending)
        raise


def _running(pending: dict[int, Future]) -> int:
    """Children still running: one that finished waits to be folded in without holding a slot."""
    return sum(1 for future in pending.values() if not future.done())


def _drop(pending: dict[int, Future]) -> None:
    """Forget children in flight: their futures finish on their own (the caller's executor waits for them)."""
    for future in pending.values():
        future.cancel()
    pending.clear()


def window_start(n: int, staleness: int) -> int:
    """How many children are folded into the state child `n` is made from."""
    return max(0, n - staleness + 1)
