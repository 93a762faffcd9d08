"""What the search already made, told without repeating what the agent already sees.

The parent is shown once, in full; everything else is told against it or against its own parent: a change as its
tuned constants (``BLOCK 128 -> 1024``) and the lines it touched, counted per region (``+12 -3 lines in
layernorm_kernel (+10 -3), ModelNew.forward (+2)``), a kernel as a unified diff against the parent (or, past
``MAX_DIFF_LINES``, its changed functions in full, Triton kernels first), a plan by the one-line idea its planner
wrote. "Already tried" lists each attempt from the parent's lineage with its idea, its outcome, its time (against
its own parent's only when both were timed on a GPU: no ratio of interpreter times) and its change; "best kernels"
lists the fastest kernels other than the parent, one per code structure (kernels that differ only in tuned
constants are one entry); "designs" lists every other code structure once, by its fastest kernel."""
from __future__ import annotations

import ast
import difflib
import re

from kernelevo.core.individual import Individual
from operators.llm.figures import fmt_time, ratio

PLAN_SUMMARY_CHARS = 240
MAX_DIFF_LINES = 80
MAX_CHANGED_LINES = 160  # a change over MAX_DIFF_LINES as a diff is shown as its changed code, within this many lines
_STEP_NUMBER = re.compile(r"^\s*(?:\d+[.)]|[-*])\s*")
_IDEA = re.compile(r"^\s*(?:[-*]\s*)?(?:\*\*|__)?idea(?:\*\*|__)?\s*:\s*(?:\*\*|__)?\s*(?P<idea>.+)$", re.IGNORECASE)
BAKED_MARK = " [converted from torch.compile at the test sizes: sizes are literals, it cannot run at full size]"


def plan_idea(note: str) -> str:
    """The one-line idea a planner wrote at the top of its plan (``Idea: ...``), or ""."""
    for line in (note or "").splitlines():
        match = _IDEA.match(line)
        if match:
            return match["idea"].strip().strip("*_").strip()
    return ""


def plan_summary(note: str, limit: int = PLAN_SUMMARY_CHARS) -> str:
    """A plan in one line, at most `limit` characters: the planner's own idea line, else its steps ("step; step")."""
    text = plan_idea(note)
    if not text:
        steps = [_STEP_NUMBER.sub("", line).strip() for line in (note or "").splitlines()]
        text = "; ".join(step for step in steps if step and not step.startswith("#"))
    return text if len(text) <= limit else text[:limit - 3].rstrip() + "..."


def _is_kernel(node) -> bool:
    """Whether a function definition is a Triton kernel (decorated with ``triton.jit`` or ``jit``)."""
    return any("jit" in ast.unparse(decorator) for decorator in node.decorator_list)


def _regions(source: str) -> list[tuple[int, int, str, bool]]:
    """(first line, last line, name, is a Triton kernel) of each function, method and class body of a module,
    innermost last."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    found = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            first = min([node.lineno] + [d.lineno for d in node.decorator_list])
            found.append((first, node.end_lineno, node.name, _is_kernel(node)))
        elif isinstance(node, ast.ClassDef):
            found.append((node.lineno, node.end_lineno, node.name, False))
            found += [(item.lineno, item.end_lineno, f"{node.name}.{item.name}", False) for item in node.body
                      if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef))]
    return found


MODULE_LEVEL = "module level"


def _region_of(line: int, regions: list) -> str:
    names = [name for first, last, name, _ in regions if first <= line <= last]
    return names[-1] if names else MODULE_LEVEL


def _changed_lines(old: str, new: str) -> tuple[dict, dict]:
    """Per region: the lines of `new` added there ({region: [0-based line of new]}) and the count of lines of `old`
    removed there ({region: count}), regions in order of first change."""
    old_regions, new_regions = _regions(old), _regions(new)
    added: dict[str, list] = {}
    removed: dict[str, int] = {}
    matcher = difflib.SequenceMatcher(None, old.splitlines(), new.splitlines(), autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        for j in range(j1, j2):
            added.setdefault(_region_of(j + 1, new_regions), []).append(j)
        for i in range(i1, i2):
            name = _region_of(i + 1, old_regions)
            removed[name] = removed.get(name, 0) + 1
    return added, removed


def code_change(old: str, new: str) -> str:
    """Lines added and removed from `old` to `new`, counted per region (function, method, class, module level):
    ``+12 -3 lines in layernorm_kernel (+10 -3), ModelNew.forward (+2)``; one region is named without counts."""
    added, removed = _changed_lines(old, new)
    names = list(dict.fromkeys([*added, *removed]))
    if not names:
        return ""
    total = f"+{sum(len(lines) for lines in added.values())} -{sum(removed.values())} lines in "
    if len(names) == 1:
        return total + names[0]
    counts = {name: " ".join(part for part in (f"+{len(added.get(name, []))}" if name in added else "",
                                                f"-{removed[name]}" if name in removed else "") if part)
              for name in names}
    return total + ", ".join(f"{name} ({counts[name]})" for name in names)


def change_summary(old, new) -> str:
    """How genome `new` differs from genome `old`: its constants and its code."""
    params = [f"{name} {old.params.get(name, '-')} -> {value}" for name, value in new.params.items()
              if old.params.get(name) != value]
    space = [f"{name} {choices}" for name, choices in new.space.items() if old.space.get(name) != choices]
    code = code_change(old.source, new.source) if old.structure != new.structure else ""
    parts = ([", ".join(params)] if params else []) + ([f"TUNABLE now {', '.join(space)}"] if space else []) \
        + ([code] if code else [])
    return "; ".join(parts) or "no change"


def changed_code(old: str, new: str, max_lines: int = MAX_CHANGED_LINES) -> str:
    """The code of `new` where it differs from `old`, for a change too large to read as a diff: each changed
    function, method or class body of `new` in full, its Triton kernels first, then the changed module-level lines;
    what does not fit in `max_lines` is named only."""
    added, removed = _changed_lines(old, new)
    lines, regions = new.splitlines(), {name: (first, last, kernel) for first, last, name, kernel in _regions(new)}
    order = sorted((name for name in added if name in regions), key=lambda name: (not regions[name][2],
                                                                                   regions[name][0]))
    shown, left = [], []
    blocks = [(f"# {name}, lines {regions[name][0]}-{regions[name][1]}:",
               lines[regions[name][0] - 1:regions[name][1]]) for name in order]
    if MODULE_LEVEL in added:
        blocks.append(("# module level, the changed lines:", [lines[j] for j in added[MODULE_LEVEL]]))
    used = 0
    for (head, body), name in zip(blocks, order + [MODULE_LEVEL]):
        if used + len(body) + 1 > max_lines:
            left.append(name)
            continue
        shown += [head, *body]
        used += len(body) + 1
    gone = [name for name in removed if name not in added]
    notes = ([f"# also changed, not shown (over the size budget): {', '.join(left)}"] if left else []) + \
        ([f"# lines only removed in: {', '.join(gone)}"] if gone else [])
    return "\n".join(shown + notes)


def unified_diff(old: str, new: str, old_name: str = "parent", new_name: str = "kernel",
                 max_lines: int = MAX_DIFF_LINES) -> str:
    """A unified diff (2 lines of context), cut after `max_lines` lines with a note."""
    lines = list(difflib.unified_diff(old.splitlines(), new.splitlines(), old_name, new_name, n=2, lineterm=""))
    if len(lines) > max_lines:
        lines = lines[:max_lines] + [f"[... {len(lines) - max_lines} more diff lines ...]"]
    return "\n".join(lines)


def gpu_timed(*individuals: Individual) -> bool:
    """Whether every one of these correct kernels was timed on a GPU: only then are their times compared as speeds
    (the interpreter's wall-clock says nothing of a GPU's, so no ratio of it is shown)."""
    return all(ind.ok and ind.result.timer != "interpreter" for ind in individuals)


def by_speed(individuals) -> list:
    """The correct ones of `individuals`, fastest first where every one was timed on a GPU; else newest first (in
    the order given, reversed): the interpreter's wall-clock ranks nothing."""
    correct = [ind for ind in individuals if ind.ok]
    return sorted(correct, key=lambda ind: ind.time_s) if gpu_timed(*correct) else correct[::-1]


def _time(ind: Individual) -> str:
    """A correct kernel's time where a GPU measured it; on the interpreter, "correct" (no time quoted)."""
    return fmt_time(ind.time_s) if gpu_timed(ind) else "correct"


def _outcome(ind: Individual, parent: Individual | None) -> str:
    if not ind.ok:
        reason = ind.reason.splitlines()[0][:160] if ind.reason else ""
        return f"{ind.status}" + (f" ({reason})" if reason else "")
    if not gpu_timed(ind):
        return "ok"
    versus = (f" vs {fmt_time(parent.time_s)} for {parent.id}, {ratio(parent.time_s, ind.time_s)}"
              if parent is not None and gpu_timed(ind, parent) else "")
    return f"ok, {fmt_time(ind.time_s)}{versus}"


def attempt_line(ind: Individual, parent: Individual | None, baked: frozenset = frozenset()) -> str:
    """One attempt: who made it from what, its plan in one line, its outcome and its change."""
    plan = plan_summary(ind.note) if ind.note and ind.note != "crossover" else ""
    origin = f"{ind.operator} of {', '.join(ind.parents)}"
    change = change_summary(parent.genome, ind.genome) if parent is not None else ""
    return (f"- {ind.id} ({origin})" + (f": \"{plan}\"" if plan else "") + f" -> {_outcome(ind, parent)}"
            + (f"; change: {change}" if change else "") + (BAKED_MARK if ind.id in baked else ""))


def _made_before(duplicates: tuple) -> list[str]:
    """The attempts of this child that gave a kernel which already existed (their plans)."""
    return [f"- this request before: \"{plan_summary(note)}\" -> made a kernel that already exists; propose a "
            f"different change" for note in duplicates]


def tried_lines(parent: Individual, archive: tuple, duplicates: tuple = (), limit: int = 8,
                baked: frozenset = frozenset()) -> list[str]:
    """What was tried from the parent and its parents, the latest `limit` attempts, and the plans of this request's
    earlier attempts that gave a kernel which already existed."""
    ancestry = {parent.id, *parent.parents}
    by_id = {ind.id: ind for ind in archive}
    lines = [attempt_line(ind, by_id.get(ind.parents[0]), baked) for ind in archive
             if ind.parents and set(ind.parents) & ancestry]
    return lines[-limit:] + _made_before(duplicates)


def history_lines(attempts: tuple, archive: tuple, duplicates: tuple = (), limit: int = 8,
                  baked: frozenset = frozenset()) -> list[str]:
    """A history of attempts (a refinement's, oldest first), the latest `limit`, each told against its own parent,
    and the attempts of this child that gave a kernel which already existed."""
    by_id = {ind.id: ind for ind in archive}
    lines = [attempt_line(ind, by_id.get(ind.parents[0]) if ind.parents else None, baked) for ind in attempts]
    return lines[-limit:] + _made_before(duplicates)


def best_entries(parent: Individual | None, archive: tuple, k: int, baked: frozenset = frozenset()) -> list[str]:
    """The `k` fastest correct kernels other than the parent (off a GPU the `k` newest, ``by_speed``), one per code
    structure, each told against the parent (its constants, or its change: a diff, or its changed code in full when
    the diff is over ``MAX_DIFF_LINES``)."""
    listed, entries = set(), []
    for ind in by_speed(archive):
        if len(entries) == k:
            break
        if (parent is not None and ind.key == parent.key) or ind.genome.structure in listed:
            continue  # the parent itself, or the same code as a faster kernel listed already
        listed.add(ind.genome.structure)
        same_code = parent is not None and ind.genome.structure == parent.genome.structure
        speed = f", {ratio(parent.time_s, ind.time_s)} than the parent" if parent is not None and \
            gpu_timed(parent, ind) else ""
        idea = plan_summary(ind.note) if ind.note and ind.note != "crossover" else ""
        head = (f"- {ind.id} ({ind.operator}){BAKED_MARK if ind.id in baked else ''}: {_time(ind)}{speed}"
                + (f"; idea: \"{idea}\"" if idea else ""))
        if parent is None:
            entries.append(f"{head}\n```python\n{ind.genome.rendered().strip()}\n```")
        elif same_code:
            entries.append(f"{head}; the parent's code with {change_summary(parent.genome, ind.genome)}")
        else:
            old, new = parent.genome.rendered(), ind.genome.rendered()
            diff = unified_diff(old, new, "parent", ind.id, max_lines=10 ** 6)
            shown = (f"```diff\n{diff}\n```" if diff.count("\n") < MAX_DIFF_LINES else
                     f"its changed code in full (its diff against the parent is {diff.count(chr(10)) + 1} lines):\n"
                     f"```python\n{changed_code(old, new)}\n```")
            entries.append(f"{head}; {change_summary(parent.genome, ind.genome)}:\n{shown}")
    return entries


def design_lines(archive: tuple, skip: set, limit: int, baked: frozenset = frozenset()) -> list[str]:
    """The search's memory of designs: each distinct code structure of the archive once (those in `skip`, already
    told, left out), by its fastest correct kernel: id, maker, the plan's idea, best time and how many kernels
    share the structure; the `limit` fastest. Off a GPU (``by_speed``): by its newest correct kernel, no time, the
    `limit` newest."""
    by_structure: dict[str, list] = {}
    for ind in by_speed(archive):
        by_structure.setdefault(ind.genome.structure, []).append(ind)
    designs = [(kernels[0], len(kernels)) for structure, kernels in by_structure.items() if structure not in skip]
    lines = []
    for best, count in designs[:limit]:
        maker = next((i for i in by_structure[best.genome.structure] if i.note and i.note != "crossover"), best)
        idea = plan_summary(maker.note) if maker.note and maker.note != "crossover" else ""
        lines.append(f"- {best.id} ({best.operator}" + (f" of {', '.join(best.parents)}" if best.parents else "")
                     + ")" + (f": \"{idea}\"" if idea else "")
                     + (f" -> best {fmt_time(best.time_s)}" if gpu_timed(best) else " -> correct")
                     + (f" over {count} kernels of this code" if count > 1 else "")
                     + (BAKED_MARK if best.id in baked else ""))
    return lines
