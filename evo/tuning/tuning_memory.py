"""What finished tunings leave for later ones: the trials of an individual's ancestors of the same kernel structure
(a warm start for its study) and the configurations that failed to compile (never evaluated again).

A kernel's structure is its code with the declared launch constants and TUNABLE blanked (``Genome.structure``):
children that differ from a parent only in launch parameters or in their choices (parameter and space mutations,
space crossover) share it, and a configuration measured for one is the same kernel for the other.

Only ancestors' tunings warm-start a study: they finished before the child was made, so what its study starts from
is fixed when the child is made, whatever order concurrent tunings finish in. Each individual's record of its
trials (``Individual.tuning``) is kept here by id and is written with the individual to the run store; after a
resume, the records of ancestors tuned before it are read back from the store: the same ones.

Compile failures are shared by every individual of a structure, siblings in flight included: a configuration known
to have failed is told to its study as pruned without being evaluated, as its failed evaluation would have been,
so which sibling met the failure first changes which evaluations are spent, never what a study is told (for a
compile error, a function of the code; a compile timeout is taken as one too).
"""
from __future__ import annotations

import json
import threading

import optuna

from kernelevo.core.individual import Individual
from kernelevo.core.evaluation_record import COMPILE_FAILURES

STATES = {"complete": optuna.trial.TrialState.COMPLETE, "pruned": optuna.trial.TrialState.PRUNED}


def signature(params: dict) -> str:
    """A configuration as a hashable, order-free key."""
    return json.dumps(params, sort_keys=True, default=str)


def trial_record(params: dict, state: str, value: float | None = None, status: str = "", key: str = "",
                 note: str = "") -> dict:
    """One configuration tried, as ``Individual.tuning['trials']`` keeps it: what its study was told (state, value)
    and why (the evaluation's status and key, or the note saying why it was not evaluated)."""
    if state not in STATES:
        raise ValueError(f"unknown trial state {state!r}; one of {tuple(STATES)}")
    return {"params": dict(params), "state": state, "value": value, "status": status, "key": key, "note": note}


class TuningMemory:
    """The records of finished tunings (by individual id) and the compile failures of each structure."""

    def __init__(self, store=None):
        self._store = store  # evo.records.store.RunStore: the records of individuals tuned before a resume (None: none)
        self._records: dict[str, tuple[tuple, dict]] = {}  # id -> (parent ids, tuning record)
        self._failed: dict[tuple[str, str], str] = {}  # (structure, signature) -> compile-failure status
        self._lock = threading.Lock()

    def remember(self, individual: Individual) -> None:
        """A finished tuning, for its descendants (and its compile failures, for everyone)."""
        with self._lock:
            self._records[individual.id] = (tuple(individual.parents), individual.tuning)
        self._learn_failures(individual.tuning)

    def _record(self, ident: str) -> tuple[tuple, dict] | None:
        with self._lock:
            known = self._records.get(ident)
        if known is None and self._store is not None:
            stored = self._store.individual(ident)
            if stored is not None:
                known = (tuple(stored.parents), stored.tuning)
                with self._lock:
                    self._records.setdefault(ident, known)
                self._learn_failures(stored.tuning)
        return known

    def ancestry(self, individual: Individual, structure: str) -> list[tuple[str, list[dict]]]:
        """(id, trial records) of every ancestor of the given structure, nearest first (breadth-first over the
        parents in their order): the same list whenever it is asked, once the parents are tuned."""
        found, seen, todo = [], set(), list(individual.parents)
        while todo:
            ident = todo.pop(0)
            if ident in seen:
                continue
            seen.add(ident)
            known = self._record(ident)
            if known is None:
                continue
            parents, tuning = known
            todo.extend(parents)
            if tuning.get("structure") == structure and tuning.get("trials"):
                found.append((ident, tuning["trials"]))
        return found

    def _learn_failures(self, tuning: dict) -> None:
        structure = tuning.get("structure")
        for record in tuning.get("trials", ()):
            if record["status"] in COMPILE_FAILURES:
                self.add_failure(structure, record["params"], record["status"])

    def add_failure(self, structure: str, params: dict, status: str) -> None:
        with self._lock:
            self._failed.setdefault((structure, signature(params)), status)

    def failure(self, structure: str, params: dict) -> str:
        """The compile-failure status this configuration of the structure met before, or ''."""
        with self._lock:
            return self._failed.get((structure, signature(params)), "")


def warm_trials(space: dict, ancestry: list[tuple[str, list[dict]]]) -> list[optuna.trial.FrozenTrial]:
    """The ancestors' trials as finished trials of a study over `space`: each configuration once (as its nearest
    ancestor measured it), those outside the space's choices left out; each names the ancestor it came from."""
    distributions = {name: optuna.distributions.CategoricalDistribution(choices) for name, choices in space.items()}
    seen, trials = set(), []
    for ident, records in ancestry:
        for record in records:
            params = record["params"]
            if params.keys() != space.keys() or any(params[name] not in space[name] for name in space):
                continue
            key = signature(params)
            if key in seen:
                continue
            seen.add(key)
            complete = record["state"] == "complete"
            trials.append(optuna.trial.create_trial(
                state=STATES[record["state"]], value=record["value"] if complete else None, params=params,
                distributions=distributions, user_attrs={"warm_start_from": ident, "status": record["status"]}))
    return trials
