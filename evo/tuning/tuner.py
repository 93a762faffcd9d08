"""Inner tuning: an Optuna study per individual over the launch-parameter space its genome declares.

The sampler is a named choice (``search.tuner.sampler``): ``tpe``, multivariate TPE whose random start-up is a
third of the trials, warm-started with the trials of the individual's ancestors of the same kernel structure
(``evo.tuning.tuning_memory``: those trials count towards the start-up, so a warm-started study samples from its model
from its first trial); or ``random``, seeded random search, named so in the records. Either way the genome's own values
are the first trial, then (for a GEMM template kernel of a compiler seed) the hardware profile's ``gemm_tiles``;
configurations that break the hardware profile's limits, or that failed to compile before for the same structure,
are told as pruned without being evaluated; configurations clearly slower than the best so far are recorded as
pruned, so TPE steers away from them. Trials are compared and told by the search's one ranking rule
(``kernelevo.core.individual.rank_value``): on a GPU the measured time; on the interpreter no time ranks anything,
so configurations of one kernel (the same launches) tie and the first correct one asked is kept, the genome's own
values first. Every trial is a full evaluation (correctness first), so the winning
configuration is always verified. Without a GPU, what an LLM wrote keeps the launch settings it wrote
(``keeps_written_launch``): one trial, its own.

Trials are asked in batches of ``parallel`` and evaluated concurrently; they are told back in the order they were
asked, so the study (and the configuration chosen) is the same whatever order the evaluations finish in. For a
learning sampler ``parallel`` is part of the search, not only of its speed: TPE learns between batches. A study is
made afresh each time an individual is tuned: on resume, an interrupted individual's trials are asked again in the
same order and their evaluations come from the run store, so a resumed run chooses what an uninterrupted one would
have. The individual keeps the record of its trials (``Individual.tuning``), which its descendants start from.

Studies live in memory while they are tuned and are copied, finished, into the run's Optuna storage (run.db, what
optuna-dashboard opens) by one background thread, with the individual's own trials only (the warm start is named in
the study's user attributes); `close` waits for it. Studies asked and told through SQLite held up the start and end
of every generation (docs/measurements.md). A run killed with -9 may lack the studies of its last children in run.db;
their evaluations are in the run store, and resume tunes an interrupted generation's children again.
"""
from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor, wait
from random import Random

import optuna

from evo.service.evaluation_protocol import Evaluations
from evo.settings import SAMPLERS, TunerSettings
from evo.tuning.tuning_memory import TuningMemory, signature, trial_record, warm_trials
from kernelevo.core.individual import Individual, rank_value, ranked_by
from kernelevo.core.evaluation_record import COMPILE_FAILURES
from hardware_profiles.limits import limit_violation
from hardware_profiles.tiles import tile_starts
from operators.llm.operators import LLM_OPERATORS

optuna.logging.set_verbosity(optuna.logging.WARNING)
logging.getLogger("optuna").setLevel(logging.WARNING)
log = logging.getLogger(f"kernelevo.{__name__}")
COMPLETE, PRUNED, FAIL = optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED, optuna.trial.TrialState.FAIL
REASKS = 4  # asks in place of a configuration measured before, per trial, before a repeat is taken
RANDOM_DRAWS = 64  # random draws looking for an unmeasured configuration in place of a repeat
# what an LLM wrote, launch settings included: LLM operators' children and the initialiser's kernel
WRITTEN_BY_LLM = frozenset({op.name for op in LLM_OPERATORS} | {"initialiser"})


def keeps_written_launch(individual: Individual, on_gpu: bool) -> bool:
    """Whether an individual keeps its launch settings as written, untuned: an LLM wrote them and there is no GPU
    to time others on (the interpreter's wall-clock at test sizes would pick among them by noise)."""
    return individual.operator in WRITTEN_BY_LLM and not on_gpu


def check_tuner_settings(trials: int, parallel: int, sampler: str) -> None:
    """ValueError naming a bad ``search.tuner`` setting and its fix."""
    TunerSettings(trials=trials, parallel=parallel, sampler=sampler)


def describe_tuner(sampler: str, warm_start: bool, trials: int, parallel: int) -> str:
    """How a run tunes, in words (the run's summary and report)."""
    warm = ", warm-started from ancestors of the same structure" if sampler == "tpe" and warm_start else ""
    return f"{sampler}: {SAMPLERS[sampler]}{warm}; {trials} trials per individual, {parallel} at once"


def startup_trials(trials: int) -> int:
    """TPE's random start-up: a third of an individual's trials, at least one (Optuna's default of 10 exceeds the
    whole budget, so TPE would never leave random sampling)."""
    return max(1, trials // 3)


class Tuner:
    def __init__(self, service: Evaluations, storage_url: str | None, trials: int = TunerSettings.trials,
                 seed: int = 0, prune_factor: float = TunerSettings.prune_factor,
                 parallel: int = TunerSettings.parallel, *, sampler: str = TunerSettings.sampler,
                 warm_start: bool = TunerSettings.warm_start, store=None, seed_parallel: int | None = None,
                 seed_trials: int | None = None):
        """`storage_url`: where finished studies are copied (None: nowhere; the individuals' records hold every
        trial). `store`: the run store (evo.records.store.RunStore), where the tuning records of individuals tuned
        before a resume are read back (None: only those this tuner tuned). `seed_trials`, `seed_parallel`: trials of a
        generation-0 individual (a seed) and how many of them are asked at once (None: `trials`, `parallel`), the
        search's supply on several GPUs (``SearchSettings.seed_trials``, ``seed_batch``)."""
        check_tuner_settings(trials, parallel, sampler)
        self.service = service
        self.storage = optuna.storages.InMemoryStorage()  # the studies being tuned (thread-safe)
        self.storage_url = storage_url
        self._archive, self._rdb = ThreadPoolExecutor(1, thread_name_prefix="optuna-archive"), None
        self._copies: list = []
        self.trials = trials
        self.seed = seed
        self.prune_factor = prune_factor
        self.parallel = parallel
        self.seed_parallel = seed_parallel or parallel
        self.seed_trials = seed_trials or trials
        self.sampler = sampler
        self.warm_start = warm_start and sampler == "tpe"  # random search learns nothing from them
        self.memory = TuningMemory(store)
        self.on_gpu = all(e.on_gpu for e in service.evaluators)

    def describe(self) -> str:
        return describe_tuner(self.sampler, self.warm_start, self.trials, self.parallel)

    def study_name(self, individual: Individual) -> str:
        return f"tune-{individual.id}"

    def _budget(self, individual: Individual) -> tuple[int, int]:
        """(trials, how many at once) for `individual`: a seed's (generation 0) follow the evaluators; one that keeps
        its written launch settings has one, its own."""
        if keeps_written_launch(individual, self.on_gpu):
            return 1, 1
        if individual.generation == 0:
            return self.seed_trials, self.seed_parallel
        return self.trials, self.parallel

    def _sampler(self, individual: Individual, trials: int) -> optuna.samplers.BaseSampler:
        seed = self.seed + int(individual.key[:6], 16)
        if self.sampler == "random":
            return optuna.samplers.RandomSampler(seed=seed)
        # constant_liar: the trials of a batch, asked together, each see the others as running and spread out
        return optuna.samplers.TPESampler(multivariate=True, n_startup_trials=startup_trials(trials),
                                          constant_liar=True, seed=seed)

    def _fresh_study(self, individual: Individual, structure: str, ancestry: list, trials: int) -> optuna.Study:
        name = self.study_name(individual)  # tuned once per process; an earlier run's study is replaced in run.db
        # when this one is copied there (_copy_to_run_storage)
        try:
            study = optuna.create_study(study_name=name, storage=self.storage, direction="minimize",
                                        sampler=self._sampler(individual, trials))
        except optuna.exceptions.DuplicatedStudyError:  # tuned once in vain (Search._tune_early): copied away first
            wait(list(self._copies))
            study = optuna.create_study(study_name=name, storage=self.storage, direction="minimize",
                                        sampler=self._sampler(individual, trials))
        genome = individual.genome
        warm = warm_trials(genome.space, ancestry) if self.warm_start else []
        study.add_trials(warm)
        for key, value in (("sampler", self.sampler), ("structure", structure), ("warm_start_trials", len(warm)),
                           ("warm_start_from", sorted({t.user_attrs["warm_start_from"] for t in warm}))):
            study.set_user_attr(key, value)
        study.enqueue_trial(genome.params)
        for params in tile_starts(genome.space, genome.params, self.service.profile.gemm_tiles):
            study.enqueue_trial(params)
        return study

    def _ask(self, study: optuna.Study, space: dict, known: set, first: bool, rng: Random) -> tuple:
        """A trial and its configuration, one not measured before in this study (by the individual or the ancestors
        it was warm-started with). The sampler's proposal, unless it repeats one (TPE, sure of its best, does: it
        would tell the study nothing new): that trial is told as failed (a state no sampler learns from) and an
        unmeasured configuration drawn at random (seeded) is asked instead. The first trial, the individual's own
        configuration, is taken as it is, and so is a repeat when nearly every configuration was measured."""
        for attempt in range(REASKS + 1):
            trial = study.ask()
            params = {name: trial.suggest_categorical(name, choices) for name, choices in space.items()}
            fresh = None
            if not first and signature(params) in known and attempt < REASKS:
                fresh = next((draw for draw in ({name: rng.choice(choices) for name, choices in space.items()}
                                                for _ in range(RANDOM_DRAWS)) if signature(draw) not in known), None)
            if fresh is None:
                known.add(signature(params))
                return trial, params
            trial.set_user_attr("repeat", "measured before in this study: replaced by an unmeasured configuration")
            study.tell(trial, state=FAIL)
            study.enqueue_trial(fresh)  # asked next (unless configurations enqueued before are still waiting)

    def _skip(self, structure: str, params: dict) -> tuple[str, str] | None:
        """(note, status) of a configuration not to evaluate: beyond the profile's limits, or known not to compile."""
        violation = limit_violation(params, self.service.profile)
        if violation:
            return violation, ""
        failed = self.memory.failure(structure, params)
        if failed:
            return f"failed to compile before for this kernel structure ({failed})", failed
        return None

    def tune(self, individual: Individual) -> Individual:
        """The individual with the best of up to `trials` configurations of its space (its own only when it keeps its
        written launch settings), that one's result and the record of its tuning."""
        genome = individual.genome
        if not genome.space:
            _, result = self.service.evaluate(genome.rendered(), label=individual.operator)
            tuned = individual.tuned(genome, result, 1)
            self.memory.remember(tuned)  # its ancestors are still those of its descendants
            return tuned
        structure = genome.structure
        ancestry = self.memory.ancestry(individual, structure)
        trials, at_once = self._budget(individual)
        study = self._fresh_study(individual, structure, ancestry, trials)
        best, best_params, records = None, None, []
        known = {signature(t.params) for t in study.get_trials(deepcopy=False, states=(COMPLETE, PRUNED))}
        rng = Random(f"{self.seed}:{individual.key}")  # the draws in place of repeats
        asked = 0
        while asked < trials:
            batch = [self._ask(study, genome.space, known, asked + i == 0, rng)
                     for i in range(min(at_once, trials - asked))]
            asked += len(batch)
            batch, configs = [trial for trial, _ in batch], [params for _, params in batch]
            skipped = [self._skip(structure, params) for params in configs]
            pending = {i: self.service.submit(genome.rendered(params), label=individual.operator)
                       for i, (params, skip) in enumerate(zip(configs, skipped)) if not skip}
            for i, (trial, params) in enumerate(zip(batch, configs)):
                if skipped[i]:
                    note, status = skipped[i]
                    trial.set_user_attr("skipped", note)
                    study.tell(trial, state=PRUNED)
                    records.append(trial_record(params, "pruned", status=status, note=f"skipped: {note}"))
                    continue
                key, result = pending[i].result()
                trial.set_user_attr("eval_key", key)
                trial.set_user_attr("status", result.status)
                if result.status in COMPILE_FAILURES:
                    self.memory.add_failure(structure, params, result.status)
                note, value = "", rank_value(result)
                if result.ok and best is not None and value > self.prune_factor * rank_value(best):
                    note = f"{ranked_by(result)}: above {self.prune_factor}x the best"
                    trial.set_user_attr("pruned", note)
                if not result.ok or note:
                    study.tell(trial, state=PRUNED)
                    records.append(trial_record(params, "pruned", status=result.status, key=key, note=note))
                else:
                    study.tell(trial, value)
                    records.append(trial_record(params, "complete", value, result.status, key))
                    if best is None or value < rank_value(best):
                        best, best_params = result, params
        attrs = study.user_attrs
        tuning = {"sampler": self.sampler, "structure": structure, "warm_start": attrs["warm_start_trials"],
                  "warm_start_from": attrs["warm_start_from"], "trials": records,
                  "repeats_replaced": len(study.get_trials(deepcopy=False, states=(FAIL,)))}
        if self.storage_url is None:
            optuna.delete_study(study_name=study.study_name, storage=self.storage)
        else:
            self._copies.append(self._archive.submit(self._copy_to_run_storage, study.study_name))
        if best is not None:
            tuned = individual.tuned(genome.with_params(best_params), best, asked, tuning)
        else:  # nothing passed: the individual as its operator made it (its first trial: from the store when it
            # was evaluated), with that configuration's failure; the same whichever configurations were skipped
            _, result = self.service.evaluate(genome.rendered(), label=individual.operator)
            tuned = individual.tuned(genome, result, asked, tuning)
        self.memory.remember(tuned)
        return tuned

    def _copy_to_run_storage(self, name: str) -> None:
        """A finished study into run.db with its own trials (replacing one of the same name: an interrupted earlier
        attempt)."""
        if self._rdb is None:  # created here, once, so its tables are created once and off the search's path
            self._rdb = optuna.storages.RDBStorage(self.storage_url, engine_kwargs={"connect_args": {"timeout": 60}})
        try:
            optuna.delete_study(study_name=name, storage=self._rdb)
        except KeyError:
            pass
        study = optuna.load_study(study_name=name, storage=self.storage)
        copy = optuna.create_study(study_name=name, storage=self._rdb, direction="minimize")
        for key, value in study.user_attrs.items():
            copy.set_user_attr(key, value)
        copy.add_trials(t for t in study.get_trials(deepcopy=False, states=(COMPLETE, PRUNED))
                        if "warm_start_from" not in t.user_attrs)
        optuna.delete_study(study_name=name, storage=self.storage)

    def close(self) -> None:
        """Wait until every finished study is in run.db; say which could not be copied (the run goes on: the
        studies are a view of evaluations the run store holds)."""
        self._archive.shutdown(wait=True)
        for copy in self._copies:
            if copy.exception() is not None:
                log.warning("a tuning study was not copied into %s: %s", self.storage_url, copy.exception())
