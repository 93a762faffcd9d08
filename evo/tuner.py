"""Inner tuning: an Optuna study per individual over the launch-parameter space its genome declares.

Seeded TPE through Optuna's ask/tell interface; the genome's own values are the first trial, then (for a GEMM
template kernel of a compiler seed) the hardware profile's ``gemm_tiles``; configurations that
break the hardware profile's limits are skipped before compiling; configurations clearly slower than the best so
far are recorded as pruned, so TPE steers away from them. Every trial is a full evaluation (correctness first), so
the winning configuration is always verified.

Trials are asked in batches of ``parallel`` and evaluated concurrently; they are told back in the order they were
asked, so the study (and the configuration chosen) is the same whatever order the evaluations finish in. A study
is made afresh each time an individual is tuned: on resume, an interrupted individual's trials are asked again in
the same order and their evaluations come from the run store, so a resumed run chooses what an uninterrupted one
would have.

Studies live in memory while they are tuned and are copied, finished, into the run's Optuna storage (run.db, what
optuna-dashboard opens) by one background thread; `close` waits for it. Asked and told through SQLite, eight
children's studies took 1.5-1.8 s of Python per generation (``experiments/results/optuna_storage_cost_cpu.md``)
and held up the start and end of every generation. A run killed with -9 may lack the studies of its last children
in run.db; their evaluations are in the run store, and resume tunes an interrupted generation's children again.
"""
from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor

import optuna

from evo.evaluation import EvaluationService
from fitness.individual import Individual
from hardware_profiles.limits import limit_violation
from operators.inductor_seed.templates import tile_starts

optuna.logging.set_verbosity(optuna.logging.WARNING)
logging.getLogger("optuna").setLevel(logging.WARNING)
COMPLETE, PRUNED = optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED


class Tuner:
    def __init__(self, service: EvaluationService, storage_url: str, trials: int = 6, seed: int = 0,
                 prune_factor: float = 1.5, parallel: int = 3):
        if trials < 1 or parallel < 1:
            raise ValueError(f"search.tuner.trials and search.tuner.parallel must be at least 1, got {trials}, "
                             f"{parallel}")
        self.service = service
        self.storage = optuna.storages.InMemoryStorage()  # the studies being tuned (thread-safe)
        self.storage_url = storage_url
        self._archive, self._rdb = ThreadPoolExecutor(1, thread_name_prefix="optuna-archive"), None
        self._copies: list = []
        self.trials = trials
        self.seed = seed
        self.prune_factor = prune_factor
        self.parallel = parallel

    def study_name(self, individual: Individual) -> str:
        return f"tune-{individual.id}"

    def _fresh_study(self, individual: Individual) -> optuna.Study:
        name = self.study_name(individual)  # tuned once per process; an earlier run's study is replaced in run.db
        # when this one is copied there (_copy_to_run_storage)
        sampler = optuna.samplers.TPESampler(seed=self.seed + int(individual.key[:6], 16))
        study = optuna.create_study(study_name=name, storage=self.storage, direction="minimize", sampler=sampler)
        genome = individual.genome
        study.enqueue_trial(genome.params)
        for params in tile_starts(genome.space, genome.params, self.service.profile.gemm_tiles):
            study.enqueue_trial(params)
        return study

    def tune(self, individual: Individual) -> Individual:
        """The individual with the best of up to `trials` configurations of its space, and that one's result."""
        genome = individual.genome
        if not genome.space:
            _, result = self.service.evaluate(genome.rendered(), label=individual.operator)
            return individual.tuned(genome, result, 1)
        study = self._fresh_study(individual)
        best, best_params, last = None, None, None
        asked = 0
        while asked < self.trials:
            batch = [study.ask() for _ in range(min(self.parallel, self.trials - asked))]
            asked += len(batch)
            configs = [{name: trial.suggest_categorical(name, choices) for name, choices in genome.space.items()}
                       for trial in batch]
            skipped = [limit_violation(params, self.service.profile) for params in configs]
            pending = {i: self.service.submit(genome.rendered(params), label=individual.operator)
                       for i, (params, skip) in enumerate(zip(configs, skipped)) if not skip}
            for i, (trial, params) in enumerate(zip(batch, configs)):
                if skipped[i]:
                    trial.set_user_attr("skipped", skipped[i])
                    study.tell(trial, state=PRUNED)
                    continue
                key, result = pending[i].result()
                trial.set_user_attr("eval_key", key)
                trial.set_user_attr("status", result.status)
                last = (params, result)
                if not result.ok:
                    study.tell(trial, state=PRUNED)
                elif best is not None and result.time_s > self.prune_factor * best.time_s:
                    trial.set_user_attr("pruned", f"slower than {self.prune_factor}x the best")
                    study.tell(trial, state=PRUNED)
                else:
                    study.tell(trial, result.time_s)
                    if best is None or result.time_s < best.time_s:
                        best, best_params = result, params
        self._copies.append(self._archive.submit(self._copy_to_run_storage, study.study_name))
        if best is not None:
            return individual.tuned(genome.with_params(best_params), best, asked)
        if last is not None:  # nothing passed: the individual as its last configuration, with that failure
            return individual.tuned(genome.with_params(last[0]), last[1], asked)
        _, result = self.service.evaluate(genome.rendered(), label=individual.operator)  # every config broke limits
        return individual.tuned(genome, result, asked)

    def _copy_to_run_storage(self, name: str) -> None:
        """A finished study into run.db (replacing one of the same name: an interrupted earlier attempt)."""
        if self._rdb is None:  # created here, once, so its tables are created once and off the search's path
            self._rdb = optuna.storages.RDBStorage(self.storage_url, engine_kwargs={"connect_args": {"timeout": 60}})
        try:
            optuna.delete_study(study_name=name, storage=self._rdb)
        except KeyError:
            pass
        optuna.copy_study(from_study_name=name, from_storage=self.storage, to_storage=self._rdb)
        optuna.delete_study(study_name=name, storage=self.storage)

    def close(self) -> None:
        """Wait until every finished study is in run.db; say which could not be copied (the run goes on: the
        studies are a view of evaluations the run store holds)."""
        self._archive.shutdown(wait=True)
        for copy in self._copies:
            if copy.exception() is not None:
                logging.getLogger("kernelevo").warning("a tuning study was not copied into %s: %s", self.storage_url,
                                                       copy.exception())
