"""What the search already made, told without repeating what the agent already sees.

The parent is shown once, in full; everything else is told against it or against its own parent: a change as its
tuned constants (``BLOCK 128 -> 1024``) and the code regions it touched (``+3 -1 lines in layernorm_kernel``), a
kernel as a unified diff against the parent, a plan as a one-line summary. "Already tried" lists each attempt
from the parent's lineage with its plan summary, its outcome, its time against its own parent's and its change;
"best kernels" lists the fastest kernels other than the parent, one per code structure (kernels that differ only
in tuned constants are one entry), as diffs against the parent.
"""
from __future__ import annotations

import ast
import difflib
import re

from fitness.individual import Individual
from operators.llm.figures import fmt_time, ratio

PLAN_SUMMARY_CHARS = 240
MAX_DIFF_LINES = 80
_STEP_NUMBER = re.compile(r"^\s*(?:\d+[.)]|[-*])\s*")


def plan_summary(note: str, limit: int = PLAN_SUMMARY_CHARS) -> str:
    """A plan's steps on one line ("step; step"), at most `limit` characters."""
    steps = [_STEP_NUMBER.sub("", line).strip() for line in (note or "").splitlines()]
    text = "; ".join(step for step in steps if step and not step.startswith("#"))
    return text if len(text) <= limit else text[:limit - 3].rstrip() + "..."


def _regions(source: str) -> list[tuple[int, int, str]]:
    """(first line, last line, name) of each function, method and class body of a module, innermost last."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    found = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            found.append((node.lineno, node.end_lineno, node.name))
        elif isinstance(node, ast.ClassDef):
            found.append((node.lineno, node.end_lineno, node.name))
            found += [(item.lineno, item.end_lineno, f"{node.name}.{item.name}") for item in node.body
                      if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef))]
    return found


def _region_of(line: int, regions: list) -> str:
    names = [name for first, last, name in regions if first <= line <= last]
    return names[-1] if names else "module level"


def code_change(old: str, new: str) -> str:
    """Lines added and removed from `old` to `new`, and the regions of `new` (or `old`) they fall in."""
    added = removed = 0
    touched: list[str] = []
    old_regions, new_regions = _regions(old), _regions(new)
    matcher = difflib.SequenceMatcher(None, old.splitlines(), new.splitlines(), autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        removed, added = removed + i2 - i1, added + j2 - j1
        spots = [_region_of(j + 1, new_regions) for j in range(j1, j2)] or [_region_of(i1 + 1, old_regions)]
        touched += [name for name in spots if name not in touched]
    if not added and not removed:
        return ""
    return f"+{added} -{removed} lines in {', '.join(touched)}"


def change_summary(old, new) -> str:
    """How genome `new` differs from genome `old`: its constants and its code."""
    params = [f"{name} {old.params.get(name, '-')} -> {value}" for name, value in new.params.items()
              if old.params.get(name) != value]
    space = [f"{name} {choices}" for name, choices in new.space.items() if old.space.get(name) != choices]
    code = code_change(old.source, new.source) if old.structure != new.structure else ""
    parts = ([", ".join(params)] if params else []) + ([f"TUNABLE now {', '.join(space)}"] if space else []) \
        + ([code] if code else [])
    return "; ".join(parts) or "no change"


def unified_diff(old: str, new: str, old_name: str = "parent", new_name: str = "kernel",
                 max_lines: int = MAX_DIFF_LINES) -> str:
    """A unified diff (2 lines of context), cut after `max_lines` lines with a note."""
    lines = list(difflib.unified_diff(old.splitlines(), new.splitlines(), old_name, new_name, n=2, lineterm=""))
    if len(lines) > max_lines:
        lines = lines[:max_lines] + [f"[... {len(lines) - max_lines} more diff lines ...]"]
    return "\n".join(lines)


def _outcome(ind: Individual, parent: Individual | None) -> str:
    if not ind.ok:
        reason = ind.reason.splitlines()[0][:160] if ind.reason else ""
        return f"{ind.status}" + (f" ({reason})" if reason else "")
    base = parent.time_s if parent is not None and parent.ok else None
    versus = f" vs {fmt_time(base)} for {parent.id}, {ratio(base, ind.time_s)}" if base else ""
    return f"ok, {fmt_time(ind.time_s)}{versus}"


def attempt_line(ind: Individual, parent: Individual | None) -> str:
    """One attempt: who made it from what, its plan in one line, its outcome and its change."""
    plan = plan_summary(ind.note) if ind.note and ind.note != "crossover" else ""
    origin = f"{ind.operator} of {', '.join(ind.parents)}"
    change = change_summary(parent.genome, ind.genome) if parent is not None else ""
    return (f"- {ind.id} ({origin})" + (f": \"{plan}\"" if plan else "") + f" -> {_outcome(ind, parent)}"
            + (f"; change: {change}" if change else ""))


def _made_before(duplicates: tuple) -> list[str]:
    """The attempts of this child that gave a kernel which already existed (their plans)."""
    return [f"- this request before: \"{plan_summary(note)}\" -> made a kernel that already exists; propose a "
            f"different change" for note in duplicates]


def tried_lines(parent: Individual, archive: tuple, duplicates: tuple = (), limit: int = 8) -> list[str]:
    """What was tried from the parent and its parents, the latest `limit` attempts, and the attempts of this child
    that gave a kernel which already existed."""
    ancestry = {parent.id, *parent.parents}
    by_id = {ind.id: ind for ind in archive}
    lines = [attempt_line(ind, by_id.get(ind.parents[0])) for ind in archive
             if ind.parents and set(ind.parents) & ancestry]
    return lines[-limit:] + _made_before(duplicates)


def history_lines(attempts: tuple, archive: tuple, duplicates: tuple = (), limit: int = 8) -> list[str]:
    """A history of attempts (a refinement's, oldest first), the latest `limit`, each told against its own parent,
    and the attempts of this child that gave a kernel which already existed."""
    by_id = {ind.id: ind for ind in archive}
    lines = [attempt_line(ind, by_id.get(ind.parents[0]) if ind.parents else None) for ind in attempts]
    return lines[-limit:] + _made_before(duplicates)


def best_entries(parent: Individual | None, archive: tuple, k: int) -> list[str]:
    """The `k` fastest correct kernels other than the parent, one per code structure, each told against the parent
    (its constants, or a diff of its code)."""
    listed, entries = set(), []
    for ind in sorted((i for i in archive if i.ok), key=lambda i: i.time_s):
        if len(entries) == k:
            break
        if (parent is not None and ind.key == parent.key) or ind.genome.structure in listed:
            continue  # the parent itself, or the same code as a faster kernel listed already
        listed.add(ind.genome.structure)
        same_code = parent is not None and ind.genome.structure == parent.genome.structure
        speed = f", {ratio(parent.time_s, ind.time_s)} than the parent" if parent is not None and parent.ok else ""
        head = f"- {ind.id} ({ind.operator}): {fmt_time(ind.time_s)}{speed}"
        if parent is None:
            entries.append(f"{head}\n```python\n{ind.genome.rendered().strip()}\n```")
        elif same_code:
            entries.append(f"{head}; the parent's code with {change_summary(parent.genome, ind.genome)}")
        else:
            diff = unified_diff(parent.genome.rendered(), ind.genome.rendered(), "parent", ind.id)
            entries.append(f"{head}; {change_summary(parent.genome, ind.genome)}:\n```diff\n{diff}\n```")
    return entries
