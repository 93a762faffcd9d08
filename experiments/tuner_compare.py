"""Does the tuner learn? Its samplers compared at equal evaluations (issue: search at KernelBench scale).

For each problem, the seed kernel (the problem's own, or torch.compile's first for a KernelBench file) starts a
lineage of `--generations` individuals of one kernel structure, each the parameter mutation (the search's own
operator) of its parent's tuned kernel, each tuned with `--trials` trials. Three arms tune the same lineage:

    random    seeded random search (search.tuner.sampler=random)
    tpe       multivariate TPE, each study fresh (warm_start=false)
    tpe_warm  multivariate TPE, each study warm-started with its ancestors' trials (the default)

each with `--seeds` tuner seeds. Reported: the best time found after k trials of the lineage (anytime, trials
counted as the tuner counts them: a configuration skipped as known not to compile counts), as a ratio to the best
time any arm found for the problem, averaged over seeds. Every arm evaluates through one evaluation service whose
store is the cache, so a configuration two arms try is measured once and both see the same time: the arms differ
only in what they choose.

    python3 experiments/tuner_compare.py --out DIR [--problems a,b|path.py] [--seeds 3] [--generations 4]
                                         [--trials 6] [--parallel 3] [-- hydra overrides...]
    python3 experiments/tuner_compare.py --out DIR --quick     # the CPU interpreter, tiny: checks that it runs

Writes DIR/tuner_compare.json (every arm's trial records) and DIR/tuner_compare.md (the table).
"""
from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from random import Random

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from evo.tuning.tuner import Tuner  # noqa: E402
from kernelevo.core.genome import Genome  # noqa: E402
from kernelevo.core.individual import Individual  # noqa: E402
from operators.base import OperatorContext  # noqa: E402
from operators.param_mutation import ParamMutation  # noqa: E402

ARMS = {"random": {"sampler": "random", "warm_start": False}, "tpe": {"sampler": "tpe", "warm_start": False},
        "tpe_warm": {"sampler": "tpe", "warm_start": True}}
PROBLEMS = "matmul,small_attention,sum_reduction"
QUICK = ["device=cpu", "parallel=2", "fitness.trials=1", "fitness.timing.interpreter_reps=1"]


def lineage(tuner: Tuner, seed: Genome, generations: int, lineage_seed: int) -> list[Individual]:
    """`generations` individuals, each the parameter mutation of its parent's tuned kernel, tuned in turn."""
    mutate, tuned = ParamMutation(), []
    parent = tuner.tune(Individual(f"0.{lineage_seed}", seed, operator="seed"))
    tuned.append(parent)
    for generation in range(1, generations):
        rng = Random(f"{lineage_seed}:{generation}")
        genomes = []
        while not genomes:  # a mutation back to the parent's own kernel makes nothing: draw again
            genomes = mutate([parent], rng, OperatorContext(generation=generation))
        parent = tuner.tune(Individual(f"{generation}.{lineage_seed}", genomes[0], parents=(parent.id,),
                                       operator=mutate.name, generation=generation))
        tuned.append(parent)
    return tuned


def anytime(chain: list[Individual]) -> list[float]:
    """The best time found after each trial of the lineage, in the order tried (inf until one is correct)."""
    best, curve = math.inf, []
    for individual in chain:
        for record in individual.tuning["trials"]:
            if record["state"] == "complete":
                best = min(best, record["value"])
            curve.append(best)
    return curve


def compare(service, seed: Genome, seeds: int, generations: int, trials: int, parallel: int) -> dict:
    """Every arm's lineages on one problem: {arm: [{seed, curve, tuning}]}, each (arm, seed) lineage tuned by its own
    tuner (its own memory), all in flight at once over the shared service. The studies are not kept: the tuning
    records hold every trial."""
    def run(arm: str, lineage_seed: int) -> dict:
        tuner = Tuner(service, None, trials=trials, seed=lineage_seed, parallel=parallel, **ARMS[arm])
        chain = lineage(tuner, seed, generations, lineage_seed)
        return {"seed": lineage_seed, "curve": anytime(chain),
                "tuning": [{"id": ind.id, **ind.tuning} for ind in chain]}

    jobs = [(arm, s) for arm in ARMS for s in range(seeds)]
    with ThreadPoolExecutor(len(jobs)) as pool:
        done = list(pool.map(lambda job: run(*job), jobs))
    out: dict = {arm: [] for arm in ARMS}
    for (arm, _), result in zip(jobs, done):
        out[arm].append(result)
    return out


def summarise(arms: dict, checkpoints: list[int]) -> dict:
    """Per arm: the mean (over seeds) ratio of the best found after k trials to the best any arm found, at each k;
    and how many seeds found that best."""
    finite = [v for runs in arms.values() for run in runs for v in run["curve"] if math.isfinite(v)]
    best = min(finite) if finite else math.inf
    rows = {}
    for arm, runs in arms.items():
        ratios = {}
        for k in checkpoints:
            values = [run["curve"][min(k, len(run["curve"])) - 1] / best for run in runs]
            ratios[k] = statistics.fmean(values) if all(map(math.isfinite, values)) else None
        tuned = [ind for run in runs for ind in run["tuning"]]
        rows[arm] = {"ratio_at": ratios, "found_best": sum(run["curve"][-1] == best for run in runs),
                     "final_s": statistics.fmean(run["curve"][-1] for run in runs),
                     "replaced": statistics.fmean(ind["repeats_replaced"] for ind in tuned),
                     "warm_start": statistics.fmean(ind["warm_start"] for ind in tuned)}
    return {"best_s": best, "arms": rows}


def table(result: dict) -> str:
    s = result["settings"]
    lines = [f"# Tuner samplers at equal evaluations ({result['environment']['device']})", "",
             f"{s['generations']} generations of parameter mutations, {s['trials']} trials each ({s['parallel']} at "
             f"once), {s['seeds']} seeds; {result['environment']['date']}. Cells: mean over seeds of the best time "
             f"found after k trials / the best any arm found (1.00 = found it; '–': some seed had no correct "
             f"kernel yet); per individual, the mean trials its study was warm-started with and the sampler's "
             f"proposals of configurations measured before that were replaced by unmeasured ones.", ""]
    for problem in result["problems"]:
        summary = problem["summary"]
        ks = list(next(iter(summary["arms"].values()))["ratio_at"])
        lines += [f"## {problem['problem']} (best found {summary['best_s'] * 1e6:,.1f} us, "
                  f"{problem['distinct_evaluations']} distinct evaluations, {problem['wall_s']:.0f} s)", "",
                  "| sampler | " + " | ".join(f"k={k}" for k in ks) + " | seeds that found the best | warm-start "
                  "trials | repeats replaced |", "|---|" + "---|" * (len(ks) + 3)]
        for arm, row in summary["arms"].items():
            cells = ["–" if v is None else f"{v:.3f}" for v in row["ratio_at"].values()]
            lines.append(f"| {arm} | " + " | ".join(cells) + f" | {row['found_best']}/{s['seeds']} | "
                         f"{row['warm_start']:.1f} | {row['replaced']:.1f} |")
        lines.append("")
    return "\n".join(lines)


def checkpoints(generations: int, trials: int) -> list[int]:
    total = generations * trials
    return sorted({1, trials, *(trials * g for g in range(2, generations + 1)), total // 2, total} - {0})


def problem_overrides(problem: str) -> list[str]:
    """A suite problem by name, or a KernelBench file by path (as the command line rewrites problem=path)."""
    return [f"problem={problem}"] if not problem.endswith(".py") else ["problem=file", f"problem.name={problem}"]


def run_problem(problem: str, args, root: Path) -> dict:
    from hydra import compose, initialize_config_dir

    from kernelevo.config import CONF_DIR
    from kernelevo.plans import run_plan
    from evo.runs.seeding import seed_genomes
    from evo.records.store import RunStore

    with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
        plan = run_plan(compose("config", overrides=[*problem_overrides(problem), *(QUICK if args.quick else []),
                                                     *args.overrides]))
    run_dir = root / Path(problem).stem
    store = RunStore(run_dir)
    service = plan.backend.service(plan, store)
    started = time.perf_counter()
    try:
        (seed, made_by), *_ = seed_genomes(plan, None, service, run_dir)
        if not seed.space:
            raise ValueError(f"{problem}: its seed ({made_by}) declares no TUNABLE space; nothing to tune")
        arms = compare(service, seed, args.seeds, args.generations, args.trials, args.parallel)
    finally:
        service.close()
    distinct = store.distinct_evaluation_count()
    store.close()
    return {"problem": problem, "seed": made_by, "space": seed.space, "wall_s": time.perf_counter() - started,
            "distinct_evaluations": distinct, "arms": arms,
            "summary": summarise(arms, checkpoints(args.generations, args.trials))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True)
    parser.add_argument("--problems", default=PROBLEMS, help="comma-separated suite names or KernelBench files")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--generations", type=int, default=4)
    parser.add_argument("--trials", type=int, default=6)
    parser.add_argument("--parallel", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="CPU interpreter, elementwise_chain, tiny budget")
    parser.add_argument("--runs-dir", default="", help="where the run stores go (default: a temporary directory)")
    parser.add_argument("overrides", nargs="*", help="extra Hydra overrides, e.g. parallel=12")
    args = parser.parse_args()
    if args.quick:
        args.problems, args.seeds, args.generations, args.trials, args.parallel = "elementwise_chain", 2, 2, 3, 2
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    import torch

    device = torch.cuda.get_device_name() if torch.cuda.is_available() and not args.quick else "CPU interpreter"
    result = {"environment": {"device": device, "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())},
              "settings": {k: getattr(args, k) for k in ("seeds", "generations", "trials", "parallel", "overrides")},
              "problems": []}
    root = Path(args.runs_dir) if args.runs_dir else Path(tempfile.mkdtemp(prefix="tuner-compare-"))
    for problem in args.problems.split(","):
        row = run_problem(problem, args, root)
        result["problems"].append(row)
        print(f"[tuner_compare] {problem}: {json.dumps(row['summary'])}", flush=True)
        (out / "tuner_compare.json").write_text(json.dumps(result, indent=1, default=str))
        (out / "tuner_compare.md").write_text(table(result))
    print(table(result), flush=True)


if __name__ == "__main__":
    main()
