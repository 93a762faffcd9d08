"""The tuner on a fake evaluation service with a synthetic time landscape: samplers that learn (TPE leaves random
sampling within the budget, studies warm-started by ancestors of the same structure only), configurations that
failed to compile never evaluated again, and choices independent of the order evaluations finish in."""
import threading
import time
from dataclasses import replace

import optuna
import pytest

from kernelevo.core.errors import KernelevoError
from evo.reports.outcome import run_tuner
from evo.records.store import RunStore
from evo.tuning.tuner import Tuner, check_tuner_settings
from kernelevo.core.genome import Genome
from kernelevo.core.evaluation_record import EvalResult
from kernelevo.core.individual import INTERPRETER_TIMER, Individual
from fakes import SPACE, TUNER_SEED, LandscapeService, by_landscape, landscape, source

OTHER = Genome.from_source(source(TUNER_SEED.params, body="return 1"))  # another structure, the same space


def child(parent: Individual, ident: str, params: dict | None = None, genome: Genome | None = None,
          parents: tuple | None = None) -> Individual:
    genome = (genome or parent.genome).with_params(params or {"NUM_WARPS": 2})
    return Individual(ident, genome, parents=parents or (parent.id,), operator="param_mutation", generation=1)


def own(tuned: Individual) -> list[tuple]:
    """What a tuning told its study, in order: (params, state, value)."""
    return [(tuple(r["params"].items()), r["state"], r["value"]) for r in tuned.tuning["trials"]]


def test_a_fresh_tpe_study_leaves_random_sampling_within_the_budget(monkeypatch):
    """Optuna's default start-up (10 trials) exceeds a 6-trial study: the tuner sizes it, so TPE's model samples
    the second batch; random search never uses a model."""
    modelled = []
    sample = optuna.samplers.TPESampler._sample
    monkeypatch.setattr(optuna.samplers.TPESampler, "_sample",
                        lambda self, study, trial, space: modelled.append(trial.number) or sample(self, study, trial,
                                                                                                  space))
    service = LandscapeService()
    Tuner(service, None, trials=6, parallel=3).tune(Individual("0.0", TUNER_SEED))
    assert modelled and min(modelled) >= 3  # the first batch at random (told nothing yet), then the model
    modelled.clear()
    tuned = Tuner(service, None, trials=6, parallel=3, sampler="random").tune(Individual("0.0", TUNER_SEED))
    assert not modelled and tuned.tuning["sampler"] == "random"


def test_a_child_study_starts_from_its_ancestors_trials_of_the_same_structure_only():
    seen = {}
    tuner = Tuner(LandscapeService(spy=lambda source: "armed" in seen and seen.setdefault(
        "child", live_study(tuner, "tune-1.0").trials)), None, trials=6, parallel=3)
    parent = tuner.tune(Individual("0.0", TUNER_SEED))
    other = tuner.tune(Individual("0.1", OTHER))  # a crossover's other parent: another structure
    seen["armed"] = True
    kid = tuner.tune(child(parent, "1.0", parents=("0.1", "0.0")))
    del seen["armed"]
    warm = [t for t in seen["child"] if "warm_start_from" in t.user_attrs]
    assert {t.user_attrs["warm_start_from"] for t in warm} == {"0.0"}  # the study holds the parent's trials
    assert [t.params for t in warm] == distinct(r["params"] for r in parent.tuning["trials"])
    assert kid.tuning["warm_start"] == len(warm) and kid.tuning["warm_start_from"] == ["0.0"]
    assert other.tuning["structure"] != kid.tuning["structure"] == parent.tuning["structure"]
    grandchild = tuner.tune(child(kid, "2.0", {"STAGES": 3}))  # ancestors too, each configuration once
    assert grandchild.tuning["warm_start_from"] == ["0.0", "1.0"]
    assert grandchild.tuning["warm_start"] == len(distinct(r["params"] for ind in (kid, parent)
                                                           for r in ind.tuning["trials"]))
    cold = Tuner(LandscapeService(), None, trials=6, parallel=3, warm_start=False)
    cold.tune(Individual("0.0", TUNER_SEED))
    assert cold.tune(child(parent, "1.0")).tuning["warm_start"] == 0


def distinct(configurations) -> list[dict]:
    found = []
    for params in configurations:
        if params not in found:
            found.append(params)
    return found


def test_a_study_never_spends_a_trial_on_a_configuration_measured_before():
    """Warm-started TPE, sure of its parent's best, proposes it again; the tuner asks an unmeasured one instead."""
    tuner = Tuner(LandscapeService(), None, trials=6, parallel=3)
    parent = tuner.tune(Individual("0.0", TUNER_SEED))
    lineage = [parent]
    for generation in range(1, 5):
        lineage.append(tuner.tune(child(lineage[-1], f"{generation}.0", {"STAGES": 1 + generation % 3})))
    for ind in lineage[1:]:
        measured = distinct(r["params"] for ancestor in lineage[:lineage.index(ind)] for r in ancestor.tuning["trials"])
        tried = [r["params"] for r in ind.tuning["trials"]]
        assert not any(params in measured for params in tried[1:]) and len(distinct(tried)) == len(tried)
    assert sum(ind.tuning["repeats_replaced"] for ind in lineage) > 0  # it did propose repeats


def live_study(tuner: Tuner, name: str) -> optuna.Study:
    return optuna.load_study(study_name=name, storage=tuner.storage)


def test_the_choice_is_the_same_whatever_order_evaluations_finish_in():
    """Two tunings of a parent and two concurrent children, their evaluations finishing in opposite orders."""
    def lineage(delay):
        tuner = Tuner(LandscapeService(delay=delay), None, trials=6, parallel=3, seed=7)
        parent = tuner.tune(Individual("0.0", TUNER_SEED))
        kids = {}
        threads = [threading.Thread(target=lambda i=i: kids.setdefault(i, tuner.tune(
            child(parent, f"1.{i}", {"NUM_WARPS": 2 ** i})))) for i in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        return [parent, kids[0], kids[1]]

    forward = lineage(lambda n: 0.001 * (n % 3))
    backward = lineage(lambda n: 0.001 * (3 - n % 3))
    for a, b in zip(forward, backward):
        assert a.genome == b.genome and a.result.time_s == b.result.time_s and own(a) == own(b)


BROKEN = TUNER_SEED.with_params({"BLOCK_M": 256, "BLOCK_N": 128, "NUM_WARPS": 8})  # within limits, does not compile
WIDER = {**SPACE, "STAGES": [1, 2, 3, 4]}  # the same structure (TUNABLE is blanked in it), another kernel


def test_a_configuration_that_failed_to_compile_is_not_evaluated_again_for_its_structure():
    service = LandscapeService()
    tuner = Tuner(service, None, trials=3, parallel=3)
    first = tuner.tune(Individual("1.0", BROKEN))  # its own configuration fails to compile
    assert first.tuning["trials"][0]["status"] == "compile_error"
    sibling = BROKEN.with_space(WIDER)
    tried = tuner.tune(Individual("1.1", sibling)).tuning["trials"][0]  # no ancestor of it, tuned after it
    assert tried["params"] == BROKEN.params and sibling.rendered() not in service.evaluated
    assert tried["note"].startswith("skipped: failed to compile before for this kernel structure (compile_error)")
    assert tried["state"] == "pruned" and tried["status"] == "compile_error"
    other = tuner.tune(Individual("1.2", OTHER.with_params(BROKEN.params))).tuning["trials"][0]
    assert other["status"] == "compile_error" and not other["note"]  # another structure: evaluated


def test_a_skipped_failure_tells_the_study_what_its_evaluation_would_have():
    """With or without a sibling's failures known, the same configurations are tried and the same one kept."""
    alone = Tuner(LandscapeService(), None, trials=6, parallel=3).tune(Individual("1.1", BROKEN))
    tuner = Tuner(LandscapeService(), None, trials=6, parallel=3)
    tuner.tune(Individual("1.0", BROKEN.with_space(WIDER)))
    informed = tuner.tune(Individual("1.1", BROKEN))
    assert informed.tuning["trials"][0]["note"].startswith("skipped")
    assert own(informed) == own(alone) and informed.genome == alone.genome and informed.ok


def test_nothing_compiles_the_individual_keeps_its_own_configuration_and_failure():
    space = {"BLOCK_M": [256], "BLOCK_N": [128, 256], "NUM_WARPS": [1], "STAGES": [1]}
    genome = Genome.from_source(source({"BLOCK_M": 256, "BLOCK_N": 128, "NUM_WARPS": 1, "STAGES": 1}, space=space))
    tuner = Tuner(LandscapeService(), None, trials=3, parallel=1)
    tuned = tuner.tune(Individual("0.0", genome.with_params({"BLOCK_N": 256})))
    assert tuned.status == "compile_error" and tuned.genome.params["BLOCK_N"] == 256 and tuned.trials == 3


def test_after_a_resume_the_warm_start_is_read_back_from_the_run_store(tmp_path):
    store = RunStore(tmp_path)
    tuner = Tuner(LandscapeService(), store.optuna_url, trials=6, parallel=3, store=store)
    parent = tuner.tune(Individual("0.0", TUNER_SEED))
    store.add_individual(parent)  # as the search records it
    kid = tuner.tune(child(parent, "1.0"))
    tuner.close()
    resumed = Tuner(LandscapeService(), store.optuna_url, trials=6, parallel=3, store=store)  # a new process
    again = resumed.tune(child(store.individual("0.0"), "1.0"))
    resumed.close()
    assert again.tuning == kid.tuning and again.genome == kid.genome
    study = optuna.load_study(study_name="tune-1.0", storage=store.optuna_url)  # run.db: its own trials, named
    assert len(study.trials) == 6 and study.user_attrs["warm_start_from"] == ["0.0"]
    assert study.user_attrs["sampler"] == "tpe" and study.user_attrs["warm_start_trials"] == kid.tuning["warm_start"]
    store.close()


def test_sampler_names_reach_the_records_and_a_bad_one_is_refused():
    tuned = Tuner(LandscapeService(), None, trials=2, parallel=2, sampler="random").tune(Individual("0.0", TUNER_SEED))
    assert tuned.tuning["sampler"] == "random"
    assert Individual.from_lineage_dict(tuned.lineage_dict(), None).tuning == tuned.tuning  # stored with it
    config = {"search": {"tuner": {"sampler": "random", "warm_start": True, "trials": 6, "parallel": 3}}}
    assert run_tuner(config).startswith("random: seeded random search; 6 trials")
    assert run_tuner({"search": {"tuner": {"sampler": "tpe", "warm_start": True, "trials": 6, "parallel": 3}}}) == \
        "tpe: multivariate TPE, warm-started from ancestors of the same structure; 6 trials per individual, 3 at once"
    with pytest.raises(KernelevoError, match="search.tuner.sampler='grid' is not a sampler; use one of tpe, random"):
        check_tuner_settings(6, 3, "grid")


def test_a_child_tuned_again_in_one_process_replaces_its_first_study(tmp_path):
    """A search tunes a child's kernel early (``Search._tune_early``) and, where a child before it made that kernel,
    tunes its other kernel under the same id: the first study may still be on its way into run.db."""
    store = RunStore(tmp_path)
    tuner = Tuner(LandscapeService(), store.optuna_url, trials=2, parallel=2, store=store)
    copy = tuner._copy_to_run_storage
    tuner._copy_to_run_storage = lambda name: (time.sleep(0.5), copy(name))  # still in memory when tuned again
    first = tuner.tune(Individual("1.0", TUNER_SEED))
    other = TUNER_SEED.with_params({name: choices[-1] for name, choices in TUNER_SEED.space.items()})
    second = tuner.tune(Individual("1.0", Genome.from_source(other.rendered())))
    tuner.close()
    assert second.genome.key != first.genome.key or second.tuning != first.tuning
    study = optuna.load_study(study_name="tune-1.0", storage=store.optuna_url)
    assert [t.params for t in study.trials] == [r["params"] for r in second.tuning["trials"]]
    store.close()


def test_on_the_interpreter_no_wall_clock_picks_a_configuration():
    """Interpreter times rank nothing (``rank_value``): configurations of one kernel launch the same kernels, so they
    tie and the genome's own values, asked first, are kept though the landscape's wall-clock favours another; the
    study is told the launches, never a time. The same landscape read as GPU times picks its fastest."""
    def interpreted(source: str) -> EvalResult:
        result = by_landscape(source)
        return replace(result, timer=INTERPRETER_TIMER, guards={"triton_launches": 2}) if result.ok else result

    service = LandscapeService()
    service.judge = interpreted
    tuned = Tuner(service, None, trials=6, parallel=3).tune(Individual("0.0", TUNER_SEED))
    complete = [r for r in tuned.tuning["trials"] if r["state"] == "complete"]
    assert len(complete) > 1 and {r["value"] for r in complete} == {2.0}
    assert tuned.genome.params == TUNER_SEED.params
    assert landscape(TUNER_SEED.params) > min(landscape(r["params"]) for r in complete)  # a faster wall-clock lost
    on_gpu = Tuner(LandscapeService(), None, trials=6, parallel=3).tune(Individual("0.0", TUNER_SEED))
    assert landscape(on_gpu.genome.params) == min(r["value"] for r in on_gpu.tuning["trials"]
                                                  if r["state"] == "complete")
