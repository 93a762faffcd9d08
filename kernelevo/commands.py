"""Task functions behind the `kernelevo` sub-commands; each receives its composed Hydra config."""
from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from omegaconf import DictConfig


@dataclass(frozen=True)
class Command:
    config: str
    task: Callable
    help: str


def _fail(message: str) -> None:
    print(f"kernelevo: error: {message}", file=sys.stderr)
    sys.exit(2)


def _output_dir() -> Path:
    from hydra.core.hydra_config import HydraConfig

    return Path(HydraConfig.get().runtime.output_dir)


def evaluate(cfg: DictConfig) -> None:
    """Evaluate one candidate (default: the problem's bundled seed) and print the verdict."""
    from fitness.from_config import build_evaluator, read_candidate

    try:
        evaluator = build_evaluator(cfg)
        source, label = read_candidate(cfg.candidate, evaluator.problem)
    except ValueError as exc:
        _fail(str(exc))
    with evaluator:
        print(f"[kernelevo] {evaluator.describe()}", flush=True)
        result = evaluator.evaluate(source, label=label)
    out = Path(cfg.out)
    out = out if out.is_absolute() else _output_dir() / out
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(result.to_json())
    print(result.summary())
    print(f"result written to {out}")
    if not result.ok:
        sys.exit(1)


COMMANDS = {
    "evaluate": Command("evaluate", evaluate, "judge one candidate kernel: correctness, guards, timing"),
}
