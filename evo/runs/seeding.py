"""Generation 0: the seeds a search starts from, each a ``Seed`` (its genome and what made it), the seed first.

The seed: torch.compile's kernels with problem.seed=inductor or when the problem has no seed of its own (then also
one seed per variant of Inductor's options, ``inductor.variants``, that writes other kernels), else the problem's
seed; a compiler seed incorrect with TF32 dot products is replaced by its rewrite with IEEE fp32 dot products
where that is correct. The first seed as written is judged before anything else, whatever the search's wall-time
budget, and so is its IEEE rewrite where TF32 made it incorrect (their time counts against the budget;
``over_budget_s`` says by how much the run went over): a run always has a verdict on the kernel it starts from,
however short its budget (docs/measurements.md). So is, on a GPU, the seed of each variant that turns on
max-autotune's options (``floor``): the run starts no worse than the Triton max-autotune picked. With an LLM team,
``llm.initialise``: true, the initialiser agent writes the first kernel from the reference alone; from_seed, it
rewrites the seed for speed (so an LLM run starts from compile's kernels too); false, the seed as it is.

Generation 0's verdicts of earlier runs on this machine (the same seeds judged and tuned under the same judge:
``evo.service.seed_verdicts``) are read into the run store before the seeds are judged (``reuse_verdicts``) and its
own merged into them once generation 0 is over (``keep_verdicts``): a re-run judges none of them again, so its
generation 0 takes none of the search's window; ``search.generation0_s`` caps the window's share generation 0 may take.

torch.compile's capture (``start_capture``) starts before the baselines are measured and runs beside them: both
are mostly compilation on the CPU (docs/measurements.md), and the baselines' timing waits for the capture's hold on
the GPU (its lock, shared) all the same.
"""
from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import Future
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from evo.records.meta import (REWRITTEN_SEED, SEED_CACHE, SEED_CAPTURE_S, SEED_CHECK_S, SEED_WALL_S, TF32_INCORRECT,
                              VERDICTS_REUSED)
from evo.service.seed_verdicts import SeedVerdicts
from kernelevo.core.genome import Genome, evaluation_key
from fitness.problems.problem import INDUCTOR
from fitness.measure.verdict_text import brief
from kernelevo.core.evaluation_record import EvalResult
from operators.base import CURRENT_CHILD, ChildUsage
from kernelevo.seeds.inductor import autotuned
from kernelevo.seeds.inductor.cache import cache_note
from kernelevo.seeds.inductor.precision import ieee_dots

if TYPE_CHECKING:
    from evo.service.evaluation_protocol import Evaluations
    from evo.plan import RunPlan

log = logging.getLogger(f"kernelevo.{__name__}")


def reuse_verdicts(service: Evaluations, store) -> SeedVerdicts | None:
    """Generation 0's verdicts an earlier run on this machine judged (``evo.service.seed_verdicts``), put into the
    run store before the seeds are judged, so none of them is judged again (nor counted as this run's evaluations);
    the file, for ``keep_verdicts`` after generation 0. Only a new run reads it (a resume has its own verdicts);
    None where the evaluators are not this host's."""
    verdicts = SeedVerdicts.of(service.evaluators[0]) if service.evaluators else None
    if verdicts is None or store.get_meta(SEED_CHECK_S) is not None:
        return None
    reused = store.add_reused_evaluations(verdicts.load())
    store.set_meta(VERDICTS_REUSED, reused)
    if reused:
        log.info(f"generation 0: {reused} verdict(s) of earlier runs read from {verdicts.path}: not judged again")
    return verdicts


def keep_verdicts(verdicts: SeedVerdicts | None, store) -> None:
    """Generation 0's verdicts (every evaluation in the store once generation 0 is over: the seeds judged and
    tuned, before any child) merged into the machine's cache for later runs."""
    if verdicts is not None:
        verdicts.save(store.evaluations())


class Seed(NamedTuple):
    """A kernel of generation 0 and what made it: seed, inductor, inductor:<variant>, initialiser."""
    genome: Genome
    made_by: str

    @classmethod
    def from_source(cls, source: str, made_by: str) -> "Seed":
        return cls(Genome.from_source(source), made_by)


def compiler_seeded(plan: RunPlan, team, service: Evaluations) -> bool:
    """Whether generation 0 starts from torch.compile's kernels (the module's docstring says when)."""
    initialise = plan.llm.initialise if team is not None else False  # checked when the plan was made
    return initialise is not True and (plan.judge.problem.seed == INDUCTOR
                                       or service.evaluators[0].problem.seed_path is None)


def start_capture(plan: RunPlan, team, service: Evaluations, run_dir: Path) -> Future | None:
    """torch.compile's capture for generation 0, started in a thread of its own, so it runs while the baselines are
    measured: a future of (``inductor_seeds``' source per maker, the capture's seconds); None where the run has no
    compiler seeds. Its thread is a daemon and its process dies with the run (``fitness.common.lifeline``): a run
    that fails before it is read does not wait for it."""
    if not compiler_seeded(plan, team, service):
        return None
    future: Future = Future()
    evaluator = service.evaluators[0]

    def capture() -> None:
        future.set_running_or_notify_cancel()
        started = time.perf_counter()
        try:
            sources = evaluator.inductor_seeds(run_dir, plan.variants, plan.capture)
            future.set_result((sources, time.perf_counter() - started))
        except BaseException as exc:  # noqa: BLE001 - raised where it is read (make_seeds), as without the thread
            future.set_exception(exc)

    threading.Thread(target=capture, name="kernelevo-capture", daemon=True).start()
    return future


def make_seeds(plan: RunPlan, team, service: Evaluations, run_dir: Path, capture: Future | None = None) -> list[Seed]:
    """Generation 0's seeds, the seed first; the first call's time making them is stored (``seed_wall_s``: from the
    call, so a capture `start_capture` began earlier counts only where it ran on after the baselines; a resume makes
    them again from caches), and apart from it the compiler seeds' judging (``SEED_CHECK_S``: evaluations of
    generation 0, under the search's wall-time budget, which counts them: ``Search``'s `spent_s`), with how
    torch.compile's capture was got (``SEED_CACHE``: cached, or captured and why)."""
    started = time.perf_counter()
    seeds = seed_genomes(plan, team, service, run_dir, capture)
    if service.store.get_meta(SEED_WALL_S) is None:  # the seeds' check is the search's time, not this
        checked = service.store.get_meta(SEED_CHECK_S, 0.0)
        service.store.set_meta(SEED_WALL_S, time.perf_counter() - started - checked)
    return seeds


def seed_genomes(plan: RunPlan, team, service: Evaluations, run_dir: Path,
                 capture: Future | None = None) -> list[Seed]:
    """Generation 0's seeds (the module's docstring says which), the seed first; `capture`: torch.compile's capture
    already under way (``start_capture``)."""
    evaluator = service.evaluators[0]
    mode = plan.llm.initialise if team is not None else False  # checked when the plan was made
    if mode is True:
        return [Seed.from_source(_initialise(team), "initialiser")]
    compiler = compiler_seeded(plan, team, service)
    started = time.perf_counter()
    sources, capture_s = (None, None) if not compiler else capture.result() if capture is not None else \
        (evaluator.inductor_seeds(run_dir, plan.variants, plan.capture), None)
    checking, first = time.perf_counter(), service.store.get_meta(SEED_CHECK_S) is None
    capture_s = capture_s if capture_s is not None else checking - started  # read from the cache or not
    if first and compiler:  # the capture's own time (a resume's does not count)
        service.store.set_meta(SEED_CAPTURE_S, round(capture_s, 2))
    made = ([Seed.from_source(s, by) for by, s in sources.items()] if compiler
            else [Seed.from_source(evaluator.problem.seed_source(), "seed")])
    how = f" ({cache_note(sources.cache)})" if compiler and cache_note(sources.cache) else ""
    took = f", torch.compile's capture {capture_s:.1f} s{how}" if compiler else ""
    log.info(f"generation 0: {len(made)} seed(s) ({', '.join(seed.made_by for seed in made)}){took}; each is judged "
             f"and tuned, a line as each ends")
    leading = floor(made, plan.variants) if first else []  # the run's floor, judged before the budget can cut it
    for seed, judged in [(seed, service.submit(seed.genome.rendered(), label=seed.made_by)) for seed in leading]:
        log.info(f"generation 0: {seed.made_by} as written: {brief(judged.result()[1])}")
    head = ieee_where_tf32_fails(service, leading) if compiler else leading
    budget_s = plan.search.budget.generation0_wall_s if first and compiler else None
    if budget_s is not None:  # generation 0's other evaluations: the search's budget (or generation 0's) holds them
        service.cut_at(checking + budget_s)
    try:
        rest = [seed for seed in made if seed not in leading]
        captured = head + (ieee_where_tf32_fails(service, rest) if compiler else rest)
    finally:
        if budget_s is not None:  # the search sets its own
            service.cut_at(None)
    if first:  # a resume makes them again from the caches: the first call's figures stand
        service.store.set_meta(SEED_CHECK_S, time.perf_counter() - checking)  # unrounded: seed_wall_s subtracts it
        if compiler:
            service.store.set_meta(SEED_CACHE, cache_note(sources.cache))
    if mode == "from_seed":
        captured[0] = _rewritten(team, service, captured[0])
    return captured


def floor(made: list[Seed], variants: dict | None) -> list[Seed]:
    """The seeds judged before the search's budget can cut them (their IEEE rewrites too, where TF32 made them
    incorrect): the first seed as written, and the seeds of Inductor's variants that turn on max-autotune's options
    (``kernelevo.seeds.inductor.autotuned``), which hold the Triton kernels and configurations max-autotune picked, so a
    run starts no worse than them, whatever the search's budget (docs/measurements.md)."""
    names = {f"{INDUCTOR}:{name}" for name, options in (variants or {}).items() if autotuned(options)}
    return made[:1] + [seed for seed in made[1:] if seed.made_by in names]


# the compiled baseline whose code a compiler seed is: torch.compile at its defaults, and its max-autotune variant
BASELINE_OF_SEED = {INDUCTOR: "compile", f"{INDUCTOR}:max_autotune": "max_autotune"}


def ieee_where_tf32_fails(service: Evaluations, seeds: list[Seed]) -> list[Seed]:
    """`seeds`, each compiler seed whose TF32 dot products make it incorrect replaced by its rewrite with IEEE fp32
    dot products (``kernelevo.seeds.inductor.precision``) where that is correct; said in a line either way. The seed's
    own evaluation is the one the search would make (the run store keeps it). The seeds are judged at once, and so are
    the rewrites, over the evaluators (not one seed after another); the lines keep the seeds' order."""
    ieee = [ieee_dots(seed.genome.source) for seed in seeds]
    judged = [service.submit(seed.genome.rendered(), label=seed.made_by) if rewrite is not None else None
              for seed, rewrite in zip(seeds, ieee)]
    incorrect = [future is not None and future.result()[1].status == "incorrect" for future in judged]
    rewrites = [Seed.from_source(rewrite, seed.made_by) if bad else None
                for seed, rewrite, bad in zip(seeds, ieee, incorrect)]
    again = [service.submit(r.genome.rendered(), label=f"{r.made_by} (IEEE fp32 dots)") if r is not None else None
             for r in rewrites]
    failed = [BASELINE_OF_SEED[seed.made_by] for seed, bad in zip(seeds, incorrect) if seed.made_by in BASELINE_OF_SEED
              and bad]
    if failed:  # the table says so beside the speed-up over that baseline (timed with TF32)
        service.store.set_meta(TF32_INCORRECT, failed)
    kept = []
    for seed, rewrite, future in zip(seeds, rewrites, again):
        if future is not None:
            result = future.result()[1]
            why = result.reason.strip().splitlines()[0][:200] if result.reason else ""
            then = "it is correct: the search starts from that" if result.ok else f"it is {result.status} too: {why}"
            log.info(f"{seed.made_by}'s seed is incorrect with TF32 dot products; with IEEE fp32 dot products {then}")
            seed = rewrite if result.ok else seed
        kept.append(seed)
    return kept


def _rewritten(team, service: Evaluations, seed: Seed) -> Seed:
    """The initialiser's rewrite of `seed` when it is correct (the seed, what made it and its time stay on record),
    else the seed."""
    origin = "torch.compile's Triton, converted" if seed.made_by == INDUCTOR else "the problem's seed kernel"
    source = seed.genome.source
    measured = service.evaluate(source, label=seed.made_by)[1]  # the starting kernel's figures, for the initialiser
    rewrite = _initialise(team, source, origin, measured)
    check = service.evaluate(rewrite, label="initialiser")[1]  # a broken rewrite must not replace a working seed
    if check.ok:
        service.store.set_meta(REWRITTEN_SEED, {"made_by": seed.made_by, "key": evaluation_key(source)})
        return Seed.from_source(rewrite, "initialiser")
    log.info(f"the initialiser's rewrite of the seed is not usable ({check.status}: "
             f"{check.reason[:300]}); starting from the seed ({seed.made_by})")
    return seed


def _initialise(team, seed: str | None = None, origin: str = "", measured: EvalResult | None = None) -> str:
    token = CURRENT_CHILD.set(ChildUsage("0.0"))  # the initialiser's calls are charged to generation 0's seed
    try:
        return team.initialise(seed, origin, measured)
    finally:
        CURRENT_CHILD.reset(token)
