"""Role-specific context for the LLM agents, built to a token budget from named parts.

Parts: ``problem`` (the PyTorch reference), ``parent`` (the code being changed, with line numbers), ``profiling``
(its measured figures and whether it is memory or compute bound), ``hardware`` (the profile), ``tree`` (what was
already tried from this lineage and how it went), ``top_k`` (the best kernels so far), ``failures`` (recent
failures with their reasons). Each role gets the parts it needs (ROLE_PARTS), in priority order; each part can be
switched off in config (the ablations); when the budget is exceeded, the lowest-priority parts go first.
Measured figures are rounded to two significant digits, so re-measuring the same kernel rarely changes a prompt.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from fitness.genome import Genome
from hardware_profiles import HardwareProfile
from operators.llm.parsing import compact_source_view

ALL_PARTS = ("problem", "parent", "profiling", "hardware", "tree", "top_k", "failures")
ROLE_PARTS = {
    "planner": ("problem", "parent", "profiling", "hardware", "tree", "top_k", "failures"),
    "coder": ("parent", "problem", "hardware"),
    "debugger": ("problem", "failures"),
    "crossover": ("problem", "hardware"),
    "initialiser": ("problem", "hardware"),
}
CHARS_PER_TOKEN = 4


@dataclass
class ContextSettings:
    token_budget: int = 12000
    parts: dict = field(default_factory=lambda: {p: True for p in ALL_PARTS})
    top_k: int = 2
    failures: int = 3

    def enabled(self, part: str) -> bool:
        return bool(self.parts.get(part, True))


def two_digits(value: float) -> str:
    """Two significant digits, and never an exponent for what a prompt shows (410, not 4.1e+02)."""
    return f"{value:.0f}" if abs(value) >= 100 else f"{value:.2g}"


def fmt_time(seconds: float | None) -> str:
    if seconds is None:
        return "n/a"
    return f"{two_digits(seconds * 1e6)} us" if seconds < 1e-3 else f"{two_digits(seconds * 1e3)} ms"


def hardware_text(profile: HardwareProfile | None) -> str:
    if profile is None:
        return ""
    peaks = ", ".join(f"{k} {two_digits(v / 1e12)} TFLOP/s" for k, v in profile.peak_flops_per_s.items() if v)
    bandwidth = profile.memory_bandwidth_bytes_per_s
    return (f"{profile.display_name}: {profile.sm_count} SMs, {profile.shared_memory_per_block_bytes // 1024} KiB "
            f"shared memory per block, {profile.l2_cache_bytes // (1 << 20)} MiB L2, "
            f"{profile.max_threads_per_block} threads per block"
            + (f", {two_digits(bandwidth / 1e12)} TB/s memory bandwidth" if bandwidth else "")
            + (f", peak {peaks}" if peaks else "") + ".")


def profiling_text(result) -> str:
    """The parent's measured figures, and which resource bounds it."""
    if result is None or not result.ok:
        return ""
    lines = [f"time {fmt_time(result.time_s)} ({result.timer})"]
    if result.eager_s:
        lines.append(f"PyTorch eager {fmt_time(result.eager_s)}, torch.compile {fmt_time(result.compile_s)}")
    if result.sol_fraction is not None:
        lines.append(f"{result.sol_fraction:.0%} of the speed of light ({fmt_time(result.sol_s)})")
    cost = result.cost or {}
    if cost.get("bytes"):
        intensity = cost.get("flops", 0.0) / cost["bytes"]
        lines.append(f"{two_digits(cost['bytes'] / 1e6)} MB moved, {two_digits(cost.get('flops', 0) / 1e9)} GFLOP: "
                     f"{'compute' if intensity > 50 else 'memory'} bound (arithmetic intensity "
                     f"{two_digits(intensity)} FLOP/byte)")
    return "; ".join(lines)


class ContextBuilder:
    def __init__(self, settings: ContextSettings, profile: HardwareProfile | None, problem_source: str):
        self.settings = settings
        self.profile = profile
        self.problem_source = problem_source

    def _parts(self, parent: Genome | None, parent_result, archive: tuple, lineage_notes: list[str]) -> dict:
        parts = {"problem": f"## PyTorch reference\n```python\n{self.problem_source.strip()}\n```",
                 "hardware": f"## Hardware\n{hardware_text(self.profile)}"}
        if parent is not None:
            parts["parent"] = f"## Parent kernel (numbered)\n```\n{compact_source_view(parent.rendered())}\n```"
            figures = profiling_text(parent_result)
            if figures:
                parts["profiling"] = f"## Measured (parent)\n{figures}"
        if lineage_notes:
            parts["tree"] = "## Already tried from this lineage\n" + "\n".join(f"- {n}" for n in lineage_notes)
        best = sorted((i for i in archive if i.ok), key=lambda i: i.fitness.values[0])[: self.settings.top_k]
        if best:
            parts["top_k"] = "## Best kernels so far\n" + "\n\n".join(
                f"{fmt_time(i.fitness.values[0])}:\n```python\n{i.genome.rendered().strip()}\n```" for i in best)
        failed = [i for i in archive if not i.ok][-self.settings.failures:]
        if failed:
            parts["failures"] = "## Recent failures\n" + "\n".join(
                f"- {i.status}: {i.reason.splitlines()[0][:300] if i.reason else ''}" for i in failed)
        return parts

    def build(self, role: str, parent: Genome | None = None, parent_result=None, archive: tuple = (),
              lineage_notes: list[str] | None = None) -> str:
        """The context text for one role, within the token budget."""
        parts = self._parts(parent, parent_result, archive, lineage_notes or [])
        chosen = [parts[p] for p in ROLE_PARTS[role] if p in parts and self.settings.enabled(p)]
        budget = self.settings.token_budget * CHARS_PER_TOKEN
        while chosen and sum(len(c) for c in chosen) > budget and len(chosen) > 1:
            chosen.pop()  # lowest priority first
        text = "\n\n".join(chosen)
        return text if len(text) <= budget else text[:budget] + "\n[... context trimmed to the token budget ...]"
