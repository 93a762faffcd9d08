"""Turning an LLM's reply text into something evaluable: a whole module or a plan (SEARCH/REPLACE edits:
``operators.llm.edits``, with the helpers here).

Everything here is pure text work (``re`` + ``ast``; nothing is imported or run). Failures raise ``ParseError``,
whose message is written to the LLM ("your reply ...") so an operator can send it back verbatim as feedback, and
whose ``kind`` lets the caller decide what to do (retry, ask for a shorter reply, give up):

    no_code        the reply has no Python code at all
    truncated      the reply was cut off (finish_reason "length", a fence never closed, code ending mid-statement,
                   a SEARCH/REPLACE block without its end marker)
    syntax         the code (or the source after the edits) is not valid Python; ``line`` says where
    no_model_new   valid Python, but no ``class ModelNew``
    edit_mismatch  a SEARCH text matched 0 or several places in the source
    no_edits       no (well-formed) SEARCH/REPLACE block
    no_plan        a planner reply with no plan text

Partial code is never returned: a reply that may have been cut off is an error, not a shorter module.
"""
from __future__ import annotations

import ast
import re
import textwrap
from dataclasses import dataclass

from kernelevo.core import pyast

MODEL_CLASS = "ModelNew"
MAX_PLAN_LINES = 60
TRUNCATION_REASONS = frozenset({"length", "max_tokens"})  # litellm's, and Anthropic's own spelling
# How _parse reads a SyntaxError near the end of the code.
CUT_AT_LAST_LINE = "last_line"  # fenced code: an end-of-file error (unclosed bracket, missing block) on its last line
CUT_AT_EOF = "eof"  # unfenced code: an end-of-file error anywhere, or any error on its last line
NEVER_CUT = "never"  # code we assembled ourselves (edits applied): every error is a syntax error

# A fence opener: ``` or ~~~ (3+), then any info string ("python", "py", "python title=x.py", ...).
_FENCE_OPEN = re.compile(r"^[ \t]*(?P<fence>`{3,}|~{3,})[ \t]*(?P<info>[^\n]*?)[ \t]*$")
_FENCE_CLOSE = re.compile(r"^[ \t]*(?P<fence>`{3,}|~{3,})[ \t]*$")
_DEFINES_MODEL = re.compile(rf"^[ \t]*class[ \t]+{MODEL_CLASS}\b", re.MULTILINE)
# First line of an unfenced module.
_CODE_START = re.compile(r"^(?:import|from|@triton|class|def)\b")
# A column-0 line of English after the code: "This kernel fuses ...", "Note that BLOCK_SIZE=...", "**Why** ...".
_PROSE_LINE = re.compile(r"^(?:[A-Z][a-z']*[ \t]+[a-z][a-z']*[,:;]?[ \t]|\*\*\w)")
# Syntax errors the parser reports at the end of the code: it stopped before the statement was complete.
_EOF_ERROR = re.compile(r"was never closed|unexpected EOF|unterminated triple-quoted|EOF while scanning"
                        r"|expected an indented block")

_LINE_NUMBER = re.compile(r"^ *\d+\| ?")  # a line of the numbered listing (compact_source_view)

# "## Plan", "### Optimisation plan": a markdown heading with the word plan in it.
_PLAN_HEADING = re.compile(r"^[ \t]*#{1,6}[ \t]+.*\bplan\b.*$", re.IGNORECASE)
# "PLAN", "Plan:", "PLAN: tile the K loop ...", matched once ** / __ emphasis is removed from the line.
_PLAN_LINE = re.compile(r"^[ \t]*plan[ \t]*(?::[ \t]*(?P<rest>.*))?$", re.IGNORECASE)
_EMPHASIS = re.compile(r"\*\*|__")


class ParseError(ValueError):
    """A reply that cannot be turned into something evaluable; ``str(err)`` is feedback for the LLM."""

    def __init__(self, kind: str, message: str, line: int | None = None):
        super().__init__(message)
        self.kind = kind
        self.line = line  # for kind "syntax": 1-based line in the code the message refers to


@dataclass(frozen=True)
class _Block:
    """One fenced block of a reply."""
    info: str  # the info string after the opening fence, lower-cased ("python", "py", "")
    code: str  # its content, dedented
    closed: bool  # False when the reply ended inside it


# ---------------------------------------------------------------------------------------------- whole modules


def extract_code(text: str, finish_reason: str = "stop") -> str:
    """The complete Python module (defining ``class ModelNew``) in an LLM reply.

    Fenced blocks win: the last one that defines ModelNew. A reply without fences is taken whole, or from its first
    line that starts like code (``import``/``from``/``@triton``/``class``/``def``), trailing prose dropped.
    Raises ParseError: truncated / syntax / no_model_new / no_code.
    """
    text = _unify_newlines(text)
    if finish_reason in TRUNCATION_REASONS:
        raise ParseError("truncated", "your reply was cut off by the output-length limit before it was complete; "
                                      "reply again with the complete module, written more concisely")
    blocks = _fenced_blocks(text)
    if any(not block.closed for block in blocks):
        raise ParseError("truncated", "your reply was cut off inside a code block (the closing ``` fence is "
                                      "missing); reply again with the complete module in one fenced block")
    if blocks:
        return _code_from_blocks(blocks)
    return _code_without_fences(text)


def _unify_newlines(text: str) -> str:
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _fenced_blocks(text: str) -> list[_Block]:
    """The fenced blocks of ``text`` in order."""
    blocks, current, opener, info = [], None, "", ""
    for line in text.split("\n"):
        if current is None:
            match = _FENCE_OPEN.match(line)
            if match:
                current, opener, info = [], match["fence"], match["info"].strip().lower()
            continue
        if _closes(line, opener):
            blocks.append(_Block(info, textwrap.dedent("\n".join(current)), closed=True))
            current = None
        else:
            current.append(line)
    if current is not None:
        blocks.append(_Block(info, textwrap.dedent("\n".join(current)), closed=False))
    return blocks


def _closes(line: str, opener: str) -> bool:
    """Whether ``line`` closes a block opened by fence ``opener``: a bare fence of the same character, as long."""
    close = _FENCE_CLOSE.match(line)
    return bool(close) and close["fence"][0] == opener[0] and len(close["fence"]) >= len(opener)


def _without_line_numbers(block: _Block) -> _Block:
    """A block copied from the numbered listing (``  12| code`` on every non-blank line), without the numbers."""
    lines = block.code.split("\n")
    if not any(line.strip() for line in lines) or not all(_LINE_NUMBER.match(line) for line in lines if line.strip()):
        return block
    return _Block(block.info, textwrap.dedent("\n".join(_LINE_NUMBER.sub("", line, count=1) for line in lines)),
                  block.closed)


def _code_from_blocks(blocks: list[_Block]) -> str:
    """The last block defining ModelNew, checked; else the error the most module-like block deserves."""
    blocks = [_without_line_numbers(block) for block in blocks]
    model_blocks = [b for b in blocks if _DEFINES_MODEL.search(b.code)]
    if model_blocks:
        return _checked_module(model_blocks[-1].code)
    pythonish = [b for b in blocks if b.info.split()[:1] in ([], ["python"], ["py"], ["python3"])
                 and any(_CODE_START.match(line) for line in b.code.split("\n"))]
    if not pythonish:
        raise _no_code()
    code = _normalise(pythonish[-1].code)
    _parse(code, CUT_AT_LAST_LINE)
    raise _no_model_new()


def _code_without_fences(text: str) -> str:
    """Code from a reply without fences: the whole reply, or from its first code-like line (trailing prose cut)."""
    whole = _normalise(text)
    if whole.strip() and _defines_model(_try_parse(whole)):
        return whole
    lines = text.split("\n")
    start = next((i for i, line in enumerate(lines) if _CODE_START.match(line)), None)
    if start is None:
        raise _no_code()
    code = _normalise("\n".join(lines[start:]))
    tree = _try_parse(code)
    if tree is None:
        code = _cut_trailing_prose(code)
        tree = _try_parse(code)
    if tree is None:
        _parse(code, CUT_AT_EOF)  # raises truncated / syntax
    if not _defines_model(tree):
        raise _no_model_new()
    return code


def _cut_trailing_prose(code: str) -> str:
    """``code`` up to its first paragraph of column-0 English after a blank line (unchanged if there is none).

    Such a line cannot be Python, so nothing that parses is lost; code cut off mid-statement stays cut off.
    """
    lines = code.split("\n")
    for i in range(1, len(lines)):
        if not lines[i - 1].strip() and _PROSE_LINE.match(lines[i]):
            return _normalise("\n".join(lines[:i]))
    return code


def _checked_module(code: str) -> str:
    """Fenced ``code`` normalised, once it parses and defines ModelNew."""
    code = _normalise(code)
    if not code.strip():
        raise _no_code()
    if not _defines_model(_parse(code, CUT_AT_LAST_LINE)):
        raise _no_model_new()
    return code


def _normalise(code: str) -> str:
    """Trailing whitespace stripped from every line, no leading/trailing blank lines, one final newline."""
    lines = [line.rstrip() for line in _unify_newlines(code).split("\n")]
    while lines and not lines[0]:
        lines.pop(0)
    while lines and not lines[-1]:
        lines.pop()
    return "\n".join(lines) + "\n" if lines else ""


def _try_parse(code: str) -> ast.Module | None:
    try:
        return pyast.parse(code)
    except (SyntaxError, ValueError):  # ValueError: null bytes
        return None


def _parse(code: str, cut: str, what: str = "your reply's code") -> ast.Module:
    """``ast.parse(code)``; a SyntaxError becomes ParseError "truncated" when ``cut`` says it marks code that was
    cut off (see CUT_AT_LAST_LINE / CUT_AT_EOF / NEVER_CUT), else "syntax" with its line number."""
    try:
        return pyast.parse(code)
    except (SyntaxError, ValueError) as err:  # ValueError: null bytes
        line = getattr(err, "lineno", None)
        msg = getattr(err, "msg", None) or str(err)
        lines = code.split("\n")
        last = max((i + 1 for i, text in enumerate(lines) if text.strip()), default=0)
        eof_error = bool(_EOF_ERROR.search(msg))
        if not isinstance(err, SyntaxError) or "null bytes" in msg:
            cut_off = False
        elif cut == CUT_AT_EOF:
            cut_off = line is None or line >= last or eof_error
        elif cut == CUT_AT_LAST_LINE:
            cut_off = line is None or line > last or (line == last and eof_error)
        else:
            cut_off = False
        if cut_off:
            raise ParseError("truncated", f"{what} stops in the middle of a statement (line {line or last}: "
                                          f"{msg}), so it looks cut off; reply again with the complete module, "
                                          "written more concisely") from None
        where = f" on line {line}" if line else ""
        source_line = f"\n    {lines[line - 1].strip()}" if line and 0 < line <= len(lines) else ""
        raise ParseError("syntax", f"{what} has a syntax error{where}: {msg}{source_line}",
                         line=line) from None


def _defines_model(tree: ast.Module | None) -> bool:
    """Whether a parsed module defines ``class ModelNew`` at top level."""
    return tree is not None and any(isinstance(node, ast.ClassDef) and node.name == MODEL_CLASS
                                    for node in tree.body)


def _no_code() -> ParseError:
    return ParseError("no_code", "your reply contains no Python code; reply with the complete module, defining "
                                 f"`class {MODEL_CLASS}(nn.Module)`, in one ```python fenced block")


def _no_model_new() -> ParseError:
    return ParseError("no_model_new", f"your reply's code does not define `class {MODEL_CLASS}`; reply with the "
                                      f"complete module, including `class {MODEL_CLASS}(nn.Module)`, in one "
                                      "```python fenced block")


# ---------------------------------------------------------------------------------------------- plans


def extract_plan(text: str) -> str:
    """The plan in a planner reply: from its "PLAN" / "## Plan" line if it has one (else all of it), code fences
    and their contents removed, blank-line runs collapsed, at most MAX_PLAN_LINES lines.

    Raises ParseError("no_plan") when nothing is left.
    """
    lines = _without_fenced_blocks(_unify_newlines(text).split("\n"))
    start = _plan_start(lines)
    if start is not None:
        index, rest = start
        lines = ([rest] if rest else []) + lines[index + 1:]
    kept: list[str] = []
    for line in lines:
        line = line.rstrip()
        if line or (kept and kept[-1]):
            kept.append(line)
    while kept and not kept[-1]:
        kept.pop()
    if not kept:
        raise ParseError("no_plan", "your reply contains no plan; reply with a section headed `## Plan` listing "
                                    "the concrete changes to make, in prose (no code)")
    return "\n".join(kept[:MAX_PLAN_LINES]) + "\n"


def _plan_start(lines: list[str]) -> tuple[int, str] | None:
    """(index, any text after "PLAN:" on that line) of the first plan heading line, or None."""
    for index, line in enumerate(lines):
        if _PLAN_HEADING.match(line):
            return index, ""
        match = _PLAN_LINE.match(_EMPHASIS.sub("", line))
        if match:
            return index, (match["rest"] or "").strip()
    return None


def _without_fenced_blocks(lines: list[str]) -> list[str]:
    """``lines`` minus every fenced block (fences and contents; an unclosed block runs to the end)."""
    kept, opener = [], None
    for line in lines:
        if opener is None:
            match = _FENCE_OPEN.match(line)
            if match:
                opener = match["fence"]
            else:
                kept.append(line)
            continue
        if _closes(line, opener):
            opener = None
    return kept


# ---------------------------------------------------------------------------------------------- views


def compact_source_view(source: str) -> str:
    """``source`` with numbered lines (``  12| code``), for showing the LLM the exact code a plan refers to."""
    lines = _unify_newlines(source).rstrip("\n").split("\n") if source.strip() else []
    width = max(4, len(str(len(lines))))
    return "".join(f"{number:>{width}}| {line}".rstrip() + "\n" for number, line in enumerate(lines, start=1))
