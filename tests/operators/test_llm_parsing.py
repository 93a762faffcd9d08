"""Turning LLM replies into evaluable text: whole modules (fenced or not, truncated, broken), SEARCH/REPLACE edits,
plans and numbered source views. Pure text: the Triton module below is never imported or run."""
import ast

import pytest

from operators.llm.edits import apply_edits, parse_edits
from operators.llm.parsing import ParseError, compact_source_view, extract_code, extract_plan

MODULE = '''import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def scale_shift_kernel(x_ptr, out_ptr, scale, shift, n, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, x * scale + shift, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, scale: float, shift: float):
        super().__init__()
        self.scale = scale
        self.shift = shift

    def forward(self, x):
        out = torch.empty_like(x)
        n = x.numel()
        grid = (triton.cdiv(n, 1024),)
        scale_shift_kernel[grid](x, out, self.scale, self.shift, n, BLOCK_SIZE=1024)
        return out
'''

HELPER = '''@triton.jit
def relu_kernel(x_ptr, n, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    tl.store(x_ptr + offsets, tl.maximum(tl.load(x_ptr + offsets), 0.0))
'''


def fenced(code: str, info: str = "python", fence: str = "```") -> str:
    return f"{fence}{info}\n{code.rstrip()}\n{fence}"


def parse_error(kind: str, call, *args, **kwargs) -> ParseError:
    with pytest.raises(ParseError) as info:
        call(*args, **kwargs)
    assert info.value.kind == kind, str(info.value)
    assert str(info.value).startswith(("your reply", "the source after your edits"))
    return info.value


# ---------------------------------------------------------------------------------------------- extract_code


@pytest.mark.parametrize("info", ["python", "py", "", "python title=model.py", "Python3"])
def test_fenced_block_with_prose_around(info):
    reply = f"Here is the fused kernel.\n\n{fenced(MODULE, info)}\n\nIt avoids a second pass over memory."
    assert extract_code(reply) == MODULE


MODEL_ONLY = MODULE[MODULE.index("class ModelNew"):]
REVISED = MODULE.replace("1024", "2048")
# (what the reply is, the reply, the module extract_code takes from it)
REPLIES = [
    ("tilde fences", f"Sure:\n{fenced(MODULE, 'python', '~~~')}\nDone.", MODULE),
    ("a helper snippet, then the full module: the model block wins",
     f"First, a helper kernel:\n{fenced(HELPER)}\n\nThen the full module:\n{fenced(MODULE)}\n"
     f"And again the helper for reference:\n{fenced(HELPER)}\n", MODULE),
    ("several model blocks: the last", f"First attempt:\n{fenced(MODULE)}\nActually, a larger block is better:\n"
                                       f"{fenced(REVISED)}\n", REVISED),
    ("the model block is not merged with helper blocks", f"{fenced(HELPER)}\n\nand\n\n{fenced(MODEL_ONLY)}",
     MODEL_ONLY),
    ("no fences: the whole reply", MODULE, MODULE),
    ("no fences, prose before and after",
     f"Here is the optimised version:\n\n{MODULE}\nThis version fuses the scale and the shift.", MODULE),
    ("no fences, trailing prose mentioning code",
     f"{MODULE}\nNote that BLOCK_SIZE=1024 keeps every SM busy.\n\n**Why**: one pass over memory.\n", MODULE),
]


@pytest.mark.parametrize("reply, module", [r[1:] for r in REPLIES], ids=[r[0] for r in REPLIES])
def test_the_module_is_taken_from_the_reply(reply, module):
    assert extract_code(reply) == module


def test_normalises_whitespace():
    messy = "\n\n" + MODULE.replace("\n", "   \n").replace("mask = offsets < n", "mask = offsets < n\t") + "\n\n"
    assert extract_code(fenced(messy)) == MODULE
    assert extract_code(fenced(MODULE).replace("\n", "\r\n")) == MODULE


def test_indented_fence_is_dedented():
    indented = "\n".join("   " + line if line else "" for line in fenced(MODULE).split("\n"))
    assert extract_code("1. The module:\n" + indented) == MODULE


def test_truncated_mid_block():
    cut = MODULE[: MODULE.index("n = x.numel()")]
    parse_error("truncated", extract_code, f"Here you go:\n```python\n{cut}")


def test_truncated_even_when_first_block_complete():
    parse_error("truncated", extract_code, f"{fenced(MODULE)}\nNow a variant:\n```python\n{HELPER}")


def test_finish_reason_length_is_truncated_even_if_fenced():
    parse_error("truncated", extract_code, fenced(MODULE), finish_reason="length")


def test_unfenced_code_cut_mid_statement_is_truncated():
    cut = MODULE[: MODULE.index("x, out, self.scale")]  # ends inside an open bracket
    parse_error("truncated", extract_code, cut)


def test_fenced_code_ending_mid_statement_is_truncated():
    cut = MODULE[: MODULE.index("        return out")] + "        return (\n"
    parse_error("truncated", extract_code, fenced(cut))


def test_prose_only_is_no_code():
    parse_error("no_code", extract_code, "I would fuse the two kernels and use a larger BLOCK_SIZE.")
    parse_error("no_code", extract_code, "")


def test_non_python_blocks_are_no_code():
    parse_error("no_code", extract_code, "Install it first:\n```bash\npip install triton\n```")
    parse_error("no_code", extract_code, "The error was:\n```\nRuntimeError: shape mismatch\n```")


def test_mid_file_error_in_closed_fence_is_syntax_not_truncated():
    broken = MODULE.replace("mask = offsets < n", "mask = (offsets < n")  # never closed, but the fence is
    assert parse_error("syntax", extract_code, fenced(broken)).line == 11


def test_syntax_error_reports_line():
    broken = MODULE.replace("mask = offsets < n", "mask = offsets <")
    err = parse_error("syntax", extract_code, fenced(broken))
    assert err.line == 11
    assert "line 11" in str(err) and "mask = offsets <" in str(err)


def test_no_model_new():
    err = parse_error("no_model_new", extract_code, fenced(HELPER))
    assert "ModelNew" in str(err)
    parse_error("no_model_new", extract_code, f"import triton\n\n{HELPER}")


# ---------------------------------------------------------------------------------------------- edits


def block(search: str, replace: str, marks: int = 7) -> str:
    return f"{'<' * marks} SEARCH\n{search}{'=' * marks}\n{replace}{'>' * marks} REPLACE\n"


def test_single_edit():
    reply = "Use a larger tile:\n```python\n" + block("        grid = (triton.cdiv(n, 1024),)\n",
                                                     "        grid = (triton.cdiv(n, 4096),)\n") + "```\n"
    edits = parse_edits(reply)
    assert edits == [("        grid = (triton.cdiv(n, 1024),)\n", "        grid = (triton.cdiv(n, 4096),)\n")]
    result = apply_edits(MODULE, edits)
    assert result == MODULE.replace("cdiv(n, 1024)", "cdiv(n, 4096)")


def test_two_edits_apply_in_order():
    reply = (block("    x = tl.load(x_ptr + offsets, mask=mask)\n",
                   "    x = tl.load(x_ptr + offsets, mask=mask, other=0.0)\n", marks=5)
             + "\nand then\n\n"
             + block("    x = tl.load(x_ptr + offsets, mask=mask, other=0.0)\n",  # sees the first edit's result
                     "    x = tl.load(x_ptr + offsets, mask=mask, other=0.0).to(tl.float32)\n", marks=9))
    edits = parse_edits(reply)
    assert len(edits) == 2
    result = apply_edits(MODULE, edits)
    assert "mask=mask, other=0.0).to(tl.float32)\n" in result
    ast.parse(result)


def test_edit_can_delete_and_insert_lines():
    edits = parse_edits(block("        n = x.numel()\n", "") + block("        out = torch.empty_like(x)\n",
                                                                      "        out = torch.empty_like(x)\n"
                                                                      "        n = x.numel()\n"))
    assert apply_edits(MODULE, edits) == MODULE


def test_search_not_found_is_mismatch_0():
    edits = [("    y = tl.load(y_ptr + offsets)\n", "    y = 0\n")]
    err = parse_error("edit_mismatch", apply_edits, MODULE, edits)
    assert "matched 0 times" in str(err) and "y = tl.load(y_ptr + offsets)" in str(err)


def test_search_found_twice_is_mismatch_2():
    edits = [("        super().__init__()\n", "        super().__init__()\n        self.cache = {}\n"),
             ("    mask=mask)\n", "    mask=mask, other=0.0)\n"),  # no whole-line match: partial lines never match
             ]
    parse_error("edit_mismatch", apply_edits, MODULE, edits[1:])
    twice = MODULE + "\n\nclass Other(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
    err = parse_error("edit_mismatch", apply_edits, twice, edits[:1])
    assert "matched 2 times" in str(err) and "super().__init__()" in str(err)


def test_trailing_whitespace_tolerant_match():
    search = "    pid = tl.program_id(0)  \n    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)\t\n"
    replace = "    pid = tl.program_id(axis=0)\n    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)\n"
    assert apply_edits(MODULE, [(search, replace)]) == MODULE.replace("program_id(0)", "program_id(axis=0)")
    source_with_spaces = MODULE.replace("pid = tl.program_id(0)", "pid = tl.program_id(0)   ")
    assert "program_id(axis=0)" in apply_edits(source_with_spaces, [(search.replace("  \n", "\n", 1), replace)])


def test_missing_end_marker_is_truncated():
    reply = block("        n = x.numel()\n", "        n = x.numel()\n") + "<<<<<<< SEARCH\n        n = x.numel()\n=======\n"
    parse_error("truncated", parse_edits, reply)


def test_no_edit_blocks():
    parse_error("no_edits", parse_edits, "I think the kernel is already optimal.")
    parse_error("no_edits", parse_edits, "<<<<<<< SEARCH\nx = 1\n>>>>>>> REPLACE\n")  # no divider


def test_edit_result_not_parsing_is_syntax():
    edits = [("        return out\n", "        return out)\n")]  # the last line: still syntax, edits are complete
    err = parse_error("syntax", apply_edits, MODULE, edits)
    assert "line 27" in str(err) and err.line == 27
    parse_error("syntax", apply_edits, MODULE, [("    mask = offsets < n\n", "    mask = offsets <\n")])


# ---------------------------------------------------------------------------------------------- plans and views


def test_extract_plan_from_heading():
    reply = ("The kernel is memory bound: one load and one store per element.\n\n"
             "## Plan\n1. Raise BLOCK_SIZE to 4096 (line 26).\n\n\n\n2. Use num_warps=8.\n")
    assert extract_plan(reply) == "1. Raise BLOCK_SIZE to 4096 (line 26).\n\n2. Use num_warps=8.\n"


def test_extract_plan_strips_code_fences():
    reply = ("PLAN: fuse the shift into the store.\n- keep the mask\n"
             "```python\ntl.store(out_ptr + offsets, x * scale + shift, mask=mask)\n```\n- vectorise the load\n")
    plan = extract_plan(reply)
    assert plan == "fuse the shift into the store.\n- keep the mask\n- vectorise the load\n"
    assert "tl.store" not in plan


def test_extract_plan_without_heading_and_capped():
    assert extract_plan("Tile the K loop.") == "Tile the K loop.\n"
    long = "\n".join(f"step {i}" for i in range(200))
    assert len(extract_plan(long).splitlines()) <= 60
    parse_error("no_plan", extract_plan, "## Plan\n```python\nx = 1\n```\n")


def test_compact_source_view_numbering():
    view = compact_source_view(MODULE)
    lines = view.splitlines()
    assert len(lines) == len(MODULE.splitlines())
    assert lines[0] == "   1| import torch"
    assert lines[4] == "   5|"
    assert lines[11] == "  12|     x = tl.load(x_ptr + offsets, mask=mask)"
    assert view.endswith("return out\n")


def test_an_edit_copied_from_the_numbered_view_applies_without_its_numbers():
    view = compact_source_view(MODULE).splitlines()
    line = next(i for i, text in enumerate(view) if "cdiv(n, 1024)" in text)
    copied = "\n".join(view[line - 1:line + 1]) + "\n"  # two numbered lines, as the model saw them
    replaced = copied.replace("cdiv(n, 1024)", "cdiv(n, 4096)")
    edits = parse_edits(block(copied, replaced))
    assert "| " not in edits[0][0] and "| " not in edits[0][1]
    assert apply_edits(MODULE, edits) == MODULE.replace("cdiv(n, 1024)", "cdiv(n, 4096)")
    plain = parse_edits(block("        grid = (triton.cdiv(n, 1024),)\n", "        x = 1 | 2\n"))
    assert plain[0][1] == "        x = 1 | 2\n"  # code is left alone when the SEARCH lines carry no numbers
