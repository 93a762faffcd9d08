"""A run, from a composed config: evaluators -> run store -> tuner -> operators -> search -> summary.

``start_run`` begins a run in a directory; ``resume_run`` continues one from its store, with the config saved in
it. Both print one line per generation and, at the end, the best kernel's figures and where its file is.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from evo.evaluation import EvaluationService
from evo.genome import Genome
from evo.search import Budget, GenerationReport, Search, SearchSettings
from evo.store import RunStore
from evo.tuner import Tuner
from fitness.evaluator import BaselineSlot, Evaluator
from fitness.from_config import (policy_from_config, problem_from_config, profile_for, resolve_device,
                                 settings_from_config)
from fitness.result import EvalResult

BEST_KERNEL_FILE = "best_kernel.py"


def evaluation_devices(device: str, gpus, workers_per_gpu: int = 1) -> list[str]:
    """workers_per_gpu evaluators for each visible GPU (`gpus`: auto or a count), or for the CPU interpreter."""
    if workers_per_gpu < 1:
        raise ValueError(f"workers_per_gpu must be at least 1, got {workers_per_gpu}")
    if device == "cpu":
        return ["cpu"] * workers_per_gpu
    import torch

    count = torch.cuda.device_count() if gpus == "auto" else int(gpus)
    devices = [device] if device.startswith("cuda:") else [f"cuda:{i}" for i in range(max(count, 1))]
    return [d for d in devices for _ in range(workers_per_gpu)]


def build_service(cfg: DictConfig, store: RunStore) -> EvaluationService:
    device = resolve_device(str(cfg.device))
    profile = profile_for(cfg.hardware.profile, device)
    problem = problem_from_config(cfg.problem, device)
    policy, settings = policy_from_config(cfg.fitness), settings_from_config(cfg.fitness)
    devices = evaluation_devices(device, cfg.get("gpus", "auto"), cfg.get("workers_per_gpu", 1))
    shared = BaselineSlot()  # eager / torch.compile measured once for the whole pool
    evaluators = [Evaluator(problem, policy, profile, settings, device=d, baseline_slot=shared) for d in devices]
    return EvaluationService(evaluators, store)


def search_settings(cfg: DictConfig) -> SearchSettings:
    s = cfg.search
    budget = Budget(generations=s.generations, max_evaluations=s.get("max_evaluations"),
                    wall_time_s=s.get("wall_time_s"), patience=s.get("patience"))
    return SearchSettings(mu=s.mu, lambda_=s.lambda_, tournament_size=s.tournament_size,
                          hall_of_fame=s.get("hall_of_fame", 5), seed=s.seed, budget=budget)


def build_operators(cfg: DictConfig) -> list:
    return [instantiate(op) for op in cfg.operators.list]


def print_generation(report: GenerationReport) -> None:
    best = "n/a" if math.isinf(report.best_s) else _fmt(report.best_s)
    median = "n/a" if math.isinf(report.median_s) else _fmt(report.median_s)
    mark = " *" if report.improved else ""
    print(f"[kernelevo] gen {report.generation:3d} | evaluations {report.evaluations:4d} | best {best}{mark} | "
          f"median {median} | correct {report.correct}/{report.size} | {report.elapsed_s:.1f} s", flush=True)


def _fmt(seconds: float) -> str:
    return f"{seconds * 1e3:.3f} ms" if seconds >= 1e-3 else f"{seconds * 1e6:.1f} us"


@dataclass
class RunSummary:
    run_dir: Path
    best: Genome | None
    best_result: EvalResult | None
    seed_result: EvalResult | None
    stop_reason: str
    evaluations: int
    distinct_evaluations: int

    @property
    def best_file(self) -> Path:
        return self.run_dir / BEST_KERNEL_FILE

    def table(self) -> str:
        r, seed = self.best_result, self.seed_result
        if r is None or not r.ok:
            return "no correct kernel was found"
        rows = [("best kernel time", _fmt(r.time_s) + (f"  ({r.timer})" if r.timer != "cuda-events" else "")),
                ("seed kernel time", _fmt(seed.time_s) if seed is not None and seed.ok else "n/a"),
                ("speed-up vs seed", f"{seed.time_s / r.time_s:.2f}x" if seed is not None and seed.ok else "n/a"),
                ("speed-up vs eager", _x(r.speedup_vs_eager)), ("speed-up vs torch.compile", _x(r.speedup_vs_compile)),
                ("fraction of speed of light", "n/a" if r.sol_fraction is None else f"{r.sol_fraction:.1%}"),
                ("precision policy", r.policy.get("name", "?")),
                ("evaluations", f"{self.evaluations} ({self.distinct_evaluations} distinct)"),
                ("stopped because", self.stop_reason), ("best kernel file", str(self.best_file))]
        width = max(len(k) for k, _ in rows)
        return "\n".join(f"  {k:<{width}}  {v}" for k, v in rows)


def _x(value) -> str:
    return "n/a" if value is None else f"{value:.2f}x"


def summarise(store: RunStore, state: dict) -> RunSummary:
    by_id = {r["genome_id"]: r for r in store.individuals()}
    best_id = state["hall_of_fame"][0] if state.get("hall_of_fame") else None
    best = store.genome(best_id).with_params(by_id[best_id]["params"]) if best_id else None
    best_result = store.evaluation(by_id[best_id]["eval_key"]) if best_id else None
    seed_record = next(iter(by_id.values()), None)  # the first individual recorded is the seed
    seed_result = store.evaluation(seed_record["eval_key"]) if seed_record else None
    return RunSummary(store.run_dir, best, best_result, seed_result, state.get("stop_reason", ""),
                      store.evaluation_count(), store.distinct_evaluation_count())


def execute(cfg: DictConfig, run_dir: Path) -> RunSummary:
    """Run or resume the search stored in run_dir, print progress and the summary, write the best kernel."""
    settings, operators = search_settings(cfg), build_operators(cfg)  # bad config fails before anything starts
    if cfg.search.tuner.trials < 1:
        raise ValueError(f"search.tuner.trials must be at least 1, got {cfg.search.tuner.trials}")
    store = RunStore(run_dir)
    store.set_meta("config", OmegaConf.to_container(cfg, resolve=True))
    service = build_service(cfg, store)
    try:
        evaluator = service.evaluators[0]
        print(f"[kernelevo] {evaluator.describe()}; {service.workers} evaluation worker(s); run dir {run_dir}",
              flush=True)
        seed = Genome.from_source(evaluator.problem.seed_source())
        tuner = Tuner(service, store.optuna_url, trials=cfg.search.tuner.trials, seed=cfg.search.seed,
                      prune_factor=cfg.search.tuner.prune_factor)
        state = Search(seed, operators, tuner, store, settings, print_generation).run()
    finally:
        service.close()
    summary = summarise(store, state)
    if summary.best is not None:
        summary.best_file.write_text(summary.best.rendered())
    store.close()
    print(summary.table(), flush=True)
    return summary


def saved_config(run_dir: Path) -> DictConfig:
    """The config a run was started with, from its store."""
    store_path = Path(run_dir) / "run.db"
    if not store_path.is_file():
        raise ValueError(f"{run_dir} holds no run (no run.db); pass the run_dir that `kernelevo run` printed")
    store = RunStore(run_dir)
    config = store.get_meta("config")
    store.close()
    if config is None:
        raise ValueError(f"{run_dir}: the run store has no saved config; it was not made by `kernelevo run`")
    return OmegaConf.create(config)
