"""Inner tuning: an Optuna study per individual over the launch-parameter space its genome declares.

Seeded TPE; the genome's own values are the first trial; configurations that break the hardware profile's limits
are skipped before compiling; configurations clearly slower than the best so far are recorded as pruned, so TPE
steers away from them. Every trial is a full evaluation (correctness first), so the winning configuration is
always verified. Studies live in the run's database and a resumed run continues them up to the trial budget.
"""
from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass

import optuna

from evo.evaluation import EvaluationService
from evo.genome import Genome
from evo.limits import limit_violation
from fitness.result import EvalResult

optuna.logging.set_verbosity(optuna.logging.WARNING)
logging.getLogger("optuna").setLevel(logging.WARNING)


@dataclass
class Tuned:
    genome: Genome  # with the best parameters found
    key: str  # evaluation key of the best (or, if none passed, the last) configuration
    result: EvalResult
    trials: int


class Tuner:
    def __init__(self, service: EvaluationService, storage_url: str, trials: int = 6, seed: int = 0,
                 prune_factor: float = 1.5):
        if trials < 1:
            raise ValueError(f"search.tuner.trials must be at least 1, got {trials}")
        self.service = service
        # one storage for every thread of the pool: created here, once, so its tables are created once
        self.storage = optuna.storages.RDBStorage(storage_url, engine_kwargs={"connect_args": {"timeout": 60}})
        self.trials = trials
        self.seed = seed
        self.prune_factor = prune_factor

    def _study(self, genome: Genome) -> optuna.Study:
        name = f"tune-{genome.id}"  # one study per individual: its code, space and starting parameters
        sampler_seed = self.seed + int(hashlib.sha256(name.encode()).hexdigest()[:6], 16)
        study = optuna.create_study(study_name=name, storage=self.storage, direction="minimize",
                                    sampler=optuna.samplers.TPESampler(seed=sampler_seed), load_if_exists=True)
        if not study.trials:
            study.enqueue_trial(genome.params)
        return study

    def tune(self, genome: Genome) -> Tuned:
        """Evaluate the genome over up to `trials` configurations of its space; the best one wins."""
        if not genome.space:
            key, result = self.service.evaluate(genome.rendered(), label=genome.operator)
            return Tuned(genome, key, result, 1)
        study = self._study(genome)

        def objective(trial: optuna.Trial) -> float:
            params = {name: trial.suggest_categorical(name, choices) for name, choices in genome.space.items()}
            violation = limit_violation(params, self.service.profile)
            if violation:
                trial.set_user_attr("skipped", violation)
                raise optuna.TrialPruned(violation)
            key, result = self.service.evaluate(genome.rendered(params), label=genome.operator)
            trial.set_user_attr("eval_key", key)
            trial.set_user_attr("status", result.status)
            if not result.ok:
                raise optuna.TrialPruned(result.status)
            best = _best_time(study)
            if best is not None and result.time_s > self.prune_factor * best:
                trial.set_user_attr("pruned", f"slower than {self.prune_factor}x the best")
                raise optuna.TrialPruned("clearly slower")
            return result.time_s

        remaining = self.trials - len(_finished(study))
        if remaining > 0:
            study.optimize(objective, n_trials=remaining, catch=())
        return self._best(genome, study)

    def _best(self, genome: Genome, study: optuna.Study) -> Tuned:
        finished = _finished(study)
        complete = [t for t in finished if t.state == optuna.trial.TrialState.COMPLETE]
        chosen = min(complete, key=lambda t: t.value) if complete else \
            next((t for t in reversed(finished) if "eval_key" in t.user_attrs), None)
        if chosen is None:  # every configuration broke the hardware limits: report the genome as it is
            key, result = self.service.evaluate(genome.rendered(), label=genome.operator)
            return Tuned(genome, key, result, len(finished))
        key = chosen.user_attrs["eval_key"]
        result = self.service.store.evaluation(key)
        return Tuned(genome.with_params(chosen.params), key, result, len(finished))


def _finished(study: optuna.Study) -> list:
    done = (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED)
    return [t for t in study.get_trials(deepcopy=False) if t.state in done]


def _best_time(study: optuna.Study) -> float | None:
    values = [t.value for t in study.get_trials(deepcopy=False) if t.state == optuna.trial.TrialState.COMPLETE]
    return min(values) if values else None

