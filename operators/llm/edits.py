"""SEARCH/REPLACE edits in an LLM's reply: reading them (``parse_edits``) and applying them to the parent's source
(``apply_edits``). Pure text work, as in ``operators.llm.parsing``, whose ParseError (kinds ``truncated``, ``no_edits``,
``edit_mismatch``, ``syntax``, ``no_model_new``) and helpers it uses.
"""
from __future__ import annotations

import difflib
import re

from operators.llm.parsing import (_LINE_NUMBER, MODEL_CLASS, NEVER_CUT, ParseError, _defines_model, _normalise, _parse,
                                   _try_parse, _unify_newlines)

_SEARCH_MARK = re.compile(r"^[ \t]*<{5,9}[ \t]*SEARCH\b.*$")
_DIVIDER_MARK = re.compile(r"^[ \t]*={5,9}[ \t]*$")
_REPLACE_MARK = re.compile(r"^[ \t]*>{5,9}[ \t]*REPLACE\b.*$")


def parse_edits(text: str) -> list[tuple[str, str]]:
    """The (search, replace) pairs of the aider-style SEARCH/REPLACE blocks in ``text``, in order.

    Markers are 5-9 ``<``/``=``/``>`` characters; text outside blocks (prose, fences) is ignored. Each half is the
    exact lines between its markers, every line ending in a newline ("" for an empty half).
    Raises ParseError: truncated (a block never ended) / no_edits (no block, or a malformed one).
    """
    edits, search, replace, state, opened_at = [], [], [], "outside", 0
    for number, line in enumerate(_unify_newlines(text).split("\n"), start=1):
        if state == "outside":
            if _SEARCH_MARK.match(line):
                search, replace, state, opened_at = [], [], "search", number
            elif _REPLACE_MARK.match(line):  # a bare ======= outside a block may be a markdown underline
                raise _malformed(number, "a >>>>>>> REPLACE line without a <<<<<<< SEARCH line before it")
        elif state == "search":
            if _DIVIDER_MARK.match(line):
                state = "replace"
            elif _SEARCH_MARK.match(line) or _REPLACE_MARK.match(line):
                raise _malformed(opened_at, "no ======= divider between SEARCH and REPLACE")
            else:
                search.append(line)
        else:
            if _REPLACE_MARK.match(line):
                edits.append(tuple(_joined(half) for half in _unnumbered(search, replace)))
                state = "outside"
            elif _SEARCH_MARK.match(line) or _DIVIDER_MARK.match(line):
                raise _malformed(opened_at, "no >>>>>>> REPLACE line ending it")
            else:
                replace.append(line)
    if state != "outside":
        raise ParseError("truncated", f"your reply was cut off inside the SEARCH/REPLACE block opened on its line "
                                      f"{opened_at} (no >>>>>>> REPLACE line ends it); reply again with complete "
                                      "blocks, fewer or shorter if need be")
    if not edits:
        raise ParseError("no_edits", "your reply contains no SEARCH/REPLACE block; write each change as\n"
                                     "<<<<<<< SEARCH\nexact lines from the current source\n=======\nnew lines\n"
                                     ">>>>>>> REPLACE")
    return edits


def _joined(lines: list[str]) -> str:
    return "".join(line + "\n" for line in lines)


def _malformed(line: int, problem: str) -> ParseError:
    return ParseError("no_edits", f"your reply has a malformed SEARCH/REPLACE block at its line {line}: {problem}; "
                                  "each block is <<<<<<< SEARCH, the exact old lines, =======, the new lines, "
                                  ">>>>>>> REPLACE")


def _unnumbered(search: list[str], replace: list[str]) -> tuple[list[str], list[str]]:
    """A block copied from the numbered view of the code (``compact_source_view``: ``  12| code``), without the
    numbers: when every non-blank SEARCH line carries one, they are taken off both halves."""
    if not any(line.strip() for line in search) or not all(_LINE_NUMBER.match(line)
                                                           for line in search if line.strip()):
        return search, replace
    return ([_LINE_NUMBER.sub("", line, count=1) for line in search],
            [_LINE_NUMBER.sub("", line, count=1) for line in replace])


def apply_edits(source: str, edits: list[tuple[str, str]]) -> str:
    """``source`` with each (search, replace) applied in order, each to the result of the ones before.

    A SEARCH text must match exactly one run of whole lines: exactly, or else ignoring trailing whitespace on each
    line. The result must parse (and still define ModelNew if ``source`` did).
    Raises ParseError: edit_mismatch / syntax / no_model_new.
    """
    lines = _normalise(source).split("\n")[:-1]
    for number, (search, replace) in enumerate(edits, start=1):
        lines = _apply_edit(lines, search, replace, number)
    result = _normalise("\n".join(lines))
    tree = _parse(result, NEVER_CUT, what="the source after your edits")
    if not _defines_model(tree) and _defines_model(_try_parse(source)):
        raise ParseError("no_model_new", f"the source after your edits no longer defines `class {MODEL_CLASS}`; "
                                         "keep it when you edit")
    return result


def _apply_edit(lines: list[str], search: str, replace: str, number: int) -> list[str]:
    """``lines`` with the one run matching ``search`` swapped for ``replace``'s lines."""
    wanted = _unify_newlines(search).split("\n")
    if wanted[-1] == "":
        wanted.pop()
    if not any(line.strip() for line in wanted):
        raise ParseError("edit_mismatch", f"your reply's SEARCH block #{number} is empty; copy the exact lines to "
                                          "change from the current source into it")
    matches = _matches(lines, wanted, loose=False) or _matches(lines, wanted, loose=True)
    if len(matches) != 1:
        raise _mismatch(lines, wanted, number, len(matches))
    new = _unify_newlines(replace).split("\n")
    if new[-1] == "":
        new.pop()
    start = matches[0]
    return lines[:start] + new + lines[start + len(wanted):]


def _matches(lines: list[str], wanted: list[str], loose: bool) -> list[int]:
    """Start indices where ``wanted`` occurs in ``lines`` as a run of whole lines; ``loose`` ignores trailing
    whitespace on each line."""
    if loose:
        lines, wanted = [line.rstrip() for line in lines], [line.rstrip() for line in wanted]
    n = len(wanted)
    return [i for i in range(len(lines) - n + 1) if lines[i] == wanted[0] and lines[i:i + n] == wanted]


def _mismatch(lines: list[str], wanted: list[str], number: int, count: int) -> ParseError:
    """The edit_mismatch error for SEARCH block ``number`` that matched ``count`` times."""
    first = next(line for line in wanted if line.strip())
    head = f"your reply's SEARCH block #{number} (first line: `{first.strip()}`)"
    if count == 0:
        hint = "it must be copied exactly, whole lines with their indentation, from the current source"
        close = difflib.get_close_matches(first, lines, n=1, cutoff=0.6)
        if close:
            hint += f"; the closest line is {lines.index(close[0]) + 1}: `{close[0].strip()}`"
        return ParseError("edit_mismatch", f"{head} matched 0 times in the current source; {hint}")
    return ParseError("edit_mismatch", f"{head} matched {count} times in the current source; it must match exactly "
                                       "once, so include more of the surrounding lines to make it unique")
