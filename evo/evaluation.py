"""Evaluation as the search sees it: a pool of evaluators (one per visible GPU, one on the CPU interpreter)
behind the run store, which is the cache: the same rendered source is evaluated once per run, ever."""
from __future__ import annotations

import queue
import threading
from concurrent.futures import ThreadPoolExecutor

from evo.genome import evaluation_key
from evo.store import RunStore
from fitness.evaluator import Evaluator
from fitness.result import EvalResult


class EvaluationService:
    def __init__(self, evaluators: list[Evaluator], store: RunStore):
        if not evaluators:
            raise ValueError("the evaluation pool needs at least one evaluator")
        self.evaluators = evaluators
        self.store = store
        self._free: queue.Queue = queue.Queue()
        for evaluator in evaluators:
            self._free.put(evaluator)
        self._key_locks: dict[str, threading.Lock] = {}
        self._locks_guard = threading.Lock()
        self._executor = ThreadPoolExecutor(max_workers=len(evaluators), thread_name_prefix="kernelevo-eval")

    @property
    def profile(self):
        return self.evaluators[0].profile

    @property
    def workers(self) -> int:
        return len(self.evaluators)

    def _key_lock(self, key: str) -> threading.Lock:
        with self._locks_guard:
            return self._key_locks.setdefault(key, threading.Lock())

    def evaluate(self, source: str, label: str = "") -> tuple[str, EvalResult]:
        """(evaluation key, result): from the store when this source was evaluated before, else evaluated now."""
        key = evaluation_key(source)
        with self._key_lock(key):
            cached = self.store.evaluation(key)
            if cached is not None:
                return key, cached
            evaluator = self._free.get()
            try:
                result = evaluator.evaluate(source, label=label)
            finally:
                self._free.put(evaluator)
            self.store.add_evaluation(key, result)
            return key, result

    def map(self, fn, items) -> list:
        """DEAP's toolbox.map: items processed concurrently, one per evaluator in the pool."""
        return list(self._executor.map(fn, items))

    def close(self) -> None:
        self._executor.shutdown(wait=True)
        for evaluator in self.evaluators:
            evaluator.close()
