"""Role-specific context for the LLM agents, built to a token budget from named parts.

Parts: ``problem`` (the PyTorch reference), ``hardware`` (the target GPU, and where candidates are judged),
``cost_model`` (the problem at its full sizes: shapes, bytes, FLOPs, intensity, and with ``hardware`` the speed of
light and the bound on the target), ``parent`` (the code being changed, numbered: the planner names lines, the
coder finds them), ``profiling`` (the parent's measured figures, labelled with
where they were measured), ``profiler`` (Nsight Compute's metrics of the parent and the best kernel, with
``fitness.profile=ncu``), ``tree`` (what was already tried from this lineage: plan, outcome, time, change),
``top_k`` (the best kernels so far, as changes against the parent), ``designs`` (the search's memory: every other
distinct code structure once, with its best time and its plan's idea), ``failures`` (recent failures and why).
Kernels converted from torch.compile at test sizes other than the full sizes (``holds_captured_sizes``) are
marked wherever they appear: they cannot run at the full size.

The parent appears once; everything else is told against it (``operators.llm.history``). Each role gets the parts
it needs (ROLE_PARTS), in priority order; each part can be switched off in config (the ablations); over the token
budget, the lowest-priority parts go first. ``build`` returns the text and how many characters each part took,
which the run store keeps per prompt (``RunStore.prompt_sizes``).
"""
from __future__ import annotations

from dataclasses import dataclass

from kernelevo.core.individual import Individual
from fitness.problems.problem import INDUCTOR
from fitness.problems.target import Target
from operators.llm.figures import (cost_model_text, fmt_sizes, hardware_text, measured_text, measured_where,
                                   profiler_text)
from operators.llm.history import best_entries, design_lines, gpu_timed, history_lines, tried_lines
from operators.llm.parsing import compact_source_view
from operators.llm.settings import ContextSettings

ROLE_PARTS = {
    "planner": ("problem", "hardware", "cost_model", "parent", "profiling", "profiler", "tree", "top_k", "designs",
                "failures"),
    "coder": ("parent", "problem", "hardware", "cost_model"),
    "debugger": ("problem", "hardware", "profiler", "failures"),
    "crossover": ("problem", "hardware", "cost_model"),
    "initialiser": ("problem", "hardware", "cost_model"),
}
CHARS_PER_TOKEN = 4
PROFILER_HEADING = ("## Profiler metrics (Nsight Compute, one forward call on the target GPU at full size; times "
                    "under the profiler, clocks locked to base)")


def holds_captured_sizes(individual: Individual, by_id: dict) -> bool:
    """Whether `individual`'s code is torch.compile's capture as converted (``kernelevo.seeds.inductor``), which holds
    the sizes it was captured at as literals (``xnumel = 128``, strides): a compiler seed of generation 0
    (``inductor``, ``inductor:<variant>``), or a kernel of the same structure (only launch constants changed) as a
    parent that is one. `by_id`: individual id -> individual, for the parents."""
    current = individual
    while current is not None:
        if current.generation == 0 or not current.parents:
            return current.operator == INDUCTOR or current.operator.startswith(f"{INDUCTOR}:")
        current = next((p for p in (by_id.get(i) for i in current.parents)
                        if p is not None and p.genome.structure == current.genome.structure), None)
    return False


@dataclass(frozen=True)
class Context:
    text: str
    parts: dict  # part name -> characters it takes in `text`


class ContextBuilder:
    def __init__(self, settings: ContextSettings, target: Target, problem_source: str, judged_inputs: tuple = ()):
        """`judged_inputs`: the inputs at the sizes candidates are judged at (``figures.judged_inputs``)."""
        self.settings = settings
        self.target = target
        self.problem_source = problem_source
        self.judged_inputs = judged_inputs

    def baked(self, individuals) -> frozenset:
        """The ids of those of `individuals` that hold the test sizes as literals (converted from torch.compile's
        capture at test sizes other than the full sizes): they cannot run at the full size."""
        individuals = list(individuals)
        if self.target.evaluated_sizes == self.target.sizes or not self.target.evaluated_sizes:
            return frozenset()
        by_id = {ind.id: ind for ind in individuals}
        return frozenset(ind.id for ind in individuals if holds_captured_sizes(ind, by_id))

    def _parent(self, role: str, parent: Individual, baked: bool) -> str:
        code = parent.genome.rendered()
        text = f"## Parent kernel {parent.id} (numbered)\n```\n{compact_source_view(code)}```"
        if role == "coder":
            text += "\nLine numbers in the plan are those of this listing; they are not part of the code."
        if baked:
            text += (f"\nThis kernel was converted from torch.compile's capture at the test sizes "
                     f"({fmt_sizes(self.target.evaluated_sizes)}): its sizes and strides are literals of those sizes, "
                     f"so it cannot run at the full size. A child of it must read its sizes and strides from its "
                     f"inputs.")
        return text

    def _parts(self, role: str, parent: Individual | None, archive: tuple, duplicates: tuple,
               profiles: dict, attempts: tuple) -> dict:
        wanted = {part for part in ROLE_PARTS[role] if self.settings.enabled(part)}
        parts = {"problem": f"## PyTorch reference\n```python\n{self.problem_source.strip()}\n```",
                 "hardware": hardware_text(self.target),
                 "cost_model": cost_model_text(self.target, hardware=self.settings.enabled("hardware"),
                                               judged=self.judged_inputs)}
        baked = self.baked([*archive, *([parent] if parent is not None else [])])
        if parent is not None:
            parts["parent"] = self._parent(role, parent, parent.id in baked)
            figures = measured_text(parent.result, self.target)
            if figures:
                parts["profiling"] = f"## Measured (parent {parent.id})\n{figures}"
        metrics = [f"### {label}\n{text}" for label, profile in profiles.items() if (text := profiler_text(profile))]
        if metrics and "profiler" in wanted:
            parts["profiler"] = PROFILER_HEADING + "\n" + "\n".join(metrics)
        shown: set = set()  # attempts listed under "already tried" are not listed again as failures
        where = (f" (times: {measured_where(parent.result, self.target)})" if parent is not None and gpu_timed(parent)
                 else "")
        if parent is not None and "tree" in wanted:
            tried = (history_lines(attempts, archive, duplicates, self.settings.tried, baked) if attempts else
                     tried_lines(parent, archive, duplicates, self.settings.tried, baked))
            shown = {line.split(" ", 2)[1] for line in tried}
            heading = "Your attempts so far, oldest first" if attempts else "Already tried from this lineage"
            if tried:
                parts["tree"] = f"## {heading}{where}\n" + "\n".join(tried)
        best = best_entries(parent, archive, self.settings.top_k, baked) if "top_k" in wanted else []
        if best:
            timed = gpu_timed(*(i for i in archive if i.ok))
            fastest = timed and parent is not None and gpu_timed(parent) and \
                parent.time_s <= min(i.time_s for i in archive if i.ok)
            against = "" if parent is None else " (the parent is the fastest; the next ones, against it)" if fastest \
                else " (against the parent)"
            parts["top_k"] = (f"## Best kernels so far{against}\n" if timed else
                              f"## Other correct kernels so far (newest first: off a GPU no time ranks them"
                              f"{'; against the parent' if parent is not None else ''})\n") + "\n".join(best)
            shown |= {line.split(" ", 2)[1] for line in best}
        if parent is not None and "designs" in wanted:
            by_id = {ind.id: ind for ind in archive}
            told = {parent.genome.structure} | {by_id[i].genome.structure for i in shown if i in by_id}
            designs = design_lines(archive, told, self.settings.designs, baked)
            if designs:
                parts["designs"] = ((f"## Other designs so far (each code structure once, by its fastest kernel"
                                     f"{'; ' + where[2:-1] if where else ''})\n") if where else
                                    "## Other designs so far (each code structure once, by its newest correct "
                                    "kernel)\n") + "\n".join(designs)
        failed = [i for i in archive if not i.ok and i.id not in shown][-self.settings.failures:]
        if failed and "failures" in wanted:
            parts["failures"] = "## Recent failures\n" + "\n".join(
                f"- {i.id} ({i.operator}) {i.status}: {i.reason.splitlines()[0][:300] if i.reason else ''}"
                for i in failed)
        return parts

    def build(self, role: str, parent: Individual | None = None, archive: tuple = (), duplicates: tuple = (),
              profiles: dict | None = None, attempts: tuple = ()) -> Context:
        """The context for one role, within the token budget. `duplicates`: the plans of this request's earlier
        attempts that made a kernel which already existed; `profiles`: label -> profiler record (the parent's, the
        best kernel's); `attempts`: a history to tell under ``tree`` instead of the parent lineage's."""
        parts = self._parts(role, parent, archive, tuple(duplicates), profiles or {}, tuple(attempts))
        chosen = [(p, parts[p]) for p in ROLE_PARTS[role] if parts.get(p) and self.settings.enabled(p)]
        budget = self.settings.token_budget * CHARS_PER_TOKEN
        while len(chosen) > 1 and sum(len(text) for _, text in chosen) > budget:
            chosen.pop()  # lowest priority first
        text = "\n\n".join(text for _, text in chosen)
        if len(text) > budget:
            text = text[:budget] + "\n[... context trimmed to the token budget ...]"
        return Context(text, {name: len(part) for name, part in chosen})
