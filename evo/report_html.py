"""A run's report as one self-contained HTML page (report.html): the data `evo.report.collect` gathered, drawn with
the shared page helper (`evo/page.py`)."""
from __future__ import annotations

from evo.page import Raw, esc, page, png_img, table
from evo.report import (GENERATION_HEADER, LLM_HEADER, OPERATOR_HEADER, PLOT_FILE, POLICY_HEADER, REPORT_FILE, Node,
                        RunReport)


def tree(node: Node) -> Raw:
    """The lineage as a nested list: each kernel above what it was made from, the operator and change on the edge."""
    def item(n: Node) -> str:
        edge = f"<span class='edge'>&#9650; {esc(n.edge)}</span> " if n.edge else ""
        seen = " <span class='note'>(shown above)</span>" if n.repeated else ""
        below = f"<ul>{''.join(item(p) for p in n.parents)}</ul>" if n.parents else ""
        return f"<li>{edge}<code>{esc(n.label)}</code>{seen}{below}</li>"

    return Raw(f"<ul class='tree'>{item(node)}</ul>")


def diff_block(lines: list[str]) -> Raw:
    """A unified diff, each line escaped and coloured by its kind."""
    def kind(line: str) -> str:
        if line.startswith(("+++", "---")):
            return "hunk"
        return {"+": "add", "-": "del", "@": "hunk"}.get(line[:1], "")

    body = "".join(f"<span class='{kind(line)}'>{esc(line)}</span>\n" if kind(line) else esc(line) + "\n"
                   for line in lines)
    return Raw(f"<pre>{body}</pre>")


def note(text: str) -> Raw:
    return Raw(f"<p class='note'>{esc(text)}</p>")


def render(report: RunReport) -> str:
    interp = ("Times are wall-clock of Triton's CPU interpreter: they say whether a kernel is correct and how long "
              "the interpreter took, not how fast it runs on a GPU; no speed-ups are computed from them.")
    sections = [("Summary", Raw(table(("figure", "value"), report.summary) + (note(interp) if report.interpreter
                                                                                else "")))]
    sections.append(("Time per generation", Raw(png_img(report.plot_png, "best and median time per generation") +
                                                table(GENERATION_HEADER, report.generations))))
    if report.lineage is not None:
        sections.append(("Lineage of the best kernel", Raw(
            note("From the best kernel down to the seed; each edge names the operator that made the kernel above "
                 "it and how its time compares with the one below" + (" (interpreter wall-clock)."
                                                                      if report.interpreter else " (speed-up).")) +
            tree(report.lineage))))
    sections.append(("Best kernel against the seed (as written)", diff_block(report.diff) if report.diff
                     else note("The best kernel is the seed as written.")))
    sections.append(("Operators", Raw(note("improved: correct and faster than the fastest of its parents") +
                                      table(OPERATOR_HEADER, report.operators)) if report.operators
                     else note("No child was made (generation 0 only).")))
    sections.append(("LLM calls and cost", table(LLM_HEADER, report.llm) if report.llm
                     else note("No LLM call: offline operators.")))
    sections.append(("Precision policy", Raw(table(("setting", "value"), report.policy_facts) +
                                             table(POLICY_HEADER, report.policy))))
    sections.append(("Evaluations", table(("status", "evaluations"), report.statuses.most_common())))
    sections.append((None, note(f"Run directory {report.run_dir}; the same data in {REPORT_FILE} and {PLOT_FILE}; "
                                f"regenerate with: kernelevo report run_dir={report.run_dir}")))
    return page(report.title, sections)
