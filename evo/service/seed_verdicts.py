"""Generation 0's verdicts kept once per machine: the seeds a run judges and tunes before its search (torch.compile's
captured seeds, their IEEE rewrites, every tuning trial of them) are the same kernels on every run of the problem,
so their verdicts are kept beside the capture's cache and a later run (a re-run, the next bench on the machine) reads
them back instead of judging them again: its generation 0 then takes none of its search's wall-time budget.

A file is ``<cache_dir>/inductor-seeds/verdicts/<problem>-<key>.json``: evaluation key (the source's hash) -> the
verdict (``EvalResult``). Its key is the hash of everything a verdict depends on besides the source (``facts``):
the problem file's text and the sizes in effect, the GPU model and hardware profile, the precision policy, every
judge setting (trials, seeds, tolerances, timing), the torch and Triton versions and the judge's own code (every
module of ``fitness/``): any of them changed is a new key, judged again, never a stale verdict. A run reads the file
before its generation 0 (``load`` into the run store: ``RunStore.add_reused_evaluations``, which counts none of them
as this run's evaluations) and merges what its generation 0 judged into it after (``save``); processes of the same
key take turns on a lock file beside it. Verdicts that ran out of time (a load-dependent timeout) are not kept.
Only local evaluators (this host's) have a cache: a Ray actor's machine is another's.
"""
from __future__ import annotations

import json
import logging
from dataclasses import asdict
from functools import lru_cache
from pathlib import Path

from filelock import FileLock

import fitness
from kernelevo.core import evaluation_record
from kernelevo.core.genome import short_hash
from fitness.common.atomic import write_atomic
from fitness.measure.baseline_cache import gpu_model, versions
from kernelevo.core.evaluation_record import TIMED_OUT, EvalResult

log = logging.getLogger(f"kernelevo.{__name__}")
FOLDER = "inductor-seeds/verdicts"  # beside the capture's entries (kernelevo.seeds.inductor.cache.FOLDER)
# judge settings that change where or how fast a run judges, never a verdict: not in the key
NOT_KEYED = ("cache_dir", "spares", "prestart_worker", "profile", "profile_timeout_s")


@lru_cache(maxsize=1)
def judge_code() -> str:
    """A hash of the judge's code (every module of ``fitness/``) and of the record it writes
    (``kernelevo.core.evaluation_record``): a changed check, guard or record judges again."""
    root = Path(fitness.__file__).parent
    record = Path(evaluation_record.__file__)
    return short_hash("".join(f"{path.relative_to(root)}\n{path.read_text()}" for path in sorted(root.rglob("*.py")))
                      + f"kernelevo/core/{record.name}\n{record.read_text()}")


def facts(evaluator) -> dict | None:
    """Everything a verdict of `evaluator` depends on besides the source; None for an evaluator that is not this
    host's (no ``settings``: a Ray actor's, a replay's)."""
    settings = getattr(evaluator, "settings", None)
    if settings is None or not hasattr(evaluator, "cache_dir"):
        return None
    judge = {name: value for name, value in asdict(settings).items() if name not in NOT_KEYED}
    return {"problem": evaluator.problem.name, "text": short_hash(Path(evaluator.problem.path).read_text()),
            "sizes": evaluator.sizes_used, "gpu": gpu_model(evaluator.device), "profile": evaluator.profile.name,
            "policy": evaluator.policy.to_dict(), "judge": judge, "versions": versions(), "code": judge_code()}


def keepable(result: EvalResult) -> bool:
    """Whether a verdict is kept for later runs: one with a verdict that did not run out of time."""
    return not result.infrastructure and result.status != "cancelled" and result.status not in TIMED_OUT


class SeedVerdicts:
    """The verdicts file of one problem under one judge (``facts``)."""

    def __init__(self, cache_dir: Path, found: dict):
        name = found["problem"].replace("/", "_")
        key = short_hash(json.dumps(found, sort_keys=True, default=str))
        self.path = Path(cache_dir) / FOLDER / f"{name}-{key}.json"
        self.facts = found

    @classmethod
    def of(cls, evaluator) -> "SeedVerdicts | None":
        """The verdicts file of `evaluator`'s problem and judge, in its cache dir; None where it has none."""
        found = facts(evaluator)
        return None if found is None else cls(evaluator.cache_dir, found)

    def _read(self) -> dict:
        try:
            data = json.loads(self.path.read_text())
            return dict(data["verdicts"]) if data.get("facts") == json.loads(json.dumps(self.facts, default=str)) \
                else {}
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return {}  # none yet, or unreadable: judged again and written anew

    def load(self) -> dict[str, EvalResult]:
        """Evaluation key -> verdict, as kept (none when there is no file or it cannot be read)."""
        found = {}
        for key, record in self._read().items():
            try:
                found[key] = EvalResult.from_dict(record)
            except (TypeError, ValueError, KeyError):
                continue  # a record of another version: that one is judged again
        return found

    def save(self, results: dict[str, EvalResult]) -> int:
        """Merge `results` (evaluation key -> verdict) into the file, the keepable ones; returns how many it holds."""
        kept = {key: result.to_dict() for key, result in results.items() if keepable(result)}
        if not kept:
            return 0
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with FileLock(self.path.with_suffix(".lock")):
            merged = {**self._read(), **kept}
            write_atomic(self.path, json.dumps({"facts": self.facts, "verdicts": merged}, default=str))
        return len(merged)
