"""kernelevo's own Triton flash attention (kernelevo/seeds/kernels/attention.py) and how it enters a seed
(kernelevo/seeds/inductor/attentions.py): the kernel against torch's scaled_dot_product_attention through Triton's
interpreter (causal and not, a scale, odd head dims, chunked head dims, grouped-query heads, bf16/fp16); Inductor's
library attention call (on the CPU and in the forms it writes on a GPU) rewritten into a tunable launch of it, or
refused with its reason and named; level1/97's form (tests/problems/sdpa.py) seeded from torch.compile into a candidate
with no library attention call that policy `triton` judges correct."""
import ast
import importlib.util

import pytest
import torch
import torch.nn.functional as F

from conftest import PROBLEMS, make_evaluator
from kernelevo.core.genome import Genome
from fitness.judge.static_check import check_source
from fitness.problems.problem import resolve_problem
from kernelevo.seeds import inductor as seeds
from kernelevo.seeds.inductor.attentions import (AttentionRefused, Attentions, attention_op, kernel_source,
                                                 launcher_defaults)
from kernelevo.seeds.inductor.convert import convert
from kernelevo.seeds.inductor.errors import SeedError
from kernelevo.seeds.kernels.attention import flash_attention

SDPA = PROBLEMS / "sdpa.py"
SMALL = {"BLOCK_M": 16, "BLOCK_N": 16, "BLOCK_K": 16, "VALUE_BLOCK": 16}  # several tiles of every kind
# query shape, key shape, value head dim, dtype, causal, scale, launch
CASES = {
    "odd head dim": ((2, 2, 12, 6), (2, 2, 12, 6), 6, torch.float32, False, None, {}),
    "causal, more queries than keys, head dim in chunks": ((2, 3, 20, 24), (2, 3, 9, 24), 24, torch.float32, True,
                                                           None, SMALL),
    "causal, fewer queries than keys": ((1, 2, 7, 6), (1, 2, 19, 6), 6, torch.float32, True, None, SMALL),
    "scale, grouped-query heads, wide value head in column blocks": ((2, 4, 12, 8), (2, 2, 12, 8), 40, torch.float32,
                                                                     False, 0.3, SMALL),
    "bf16": ((2, 2, 12, 6), (2, 2, 12, 6), 6, torch.bfloat16, False, None, {}),
    "fp16 causal": ((2, 2, 12, 6), (2, 2, 12, 6), 6, torch.float16, True, None, {}),
    "five leading dims": ((2, 3, 2, 12, 6), (2, 3, 2, 12, 6), 6, torch.float32, False, None, {}),
}


@pytest.mark.parametrize("case", CASES)
def test_kernelevos_flash_attention_computes_what_torchs_sdpa_does(case):
    q_shape, k_shape, ev, dtype, causal, scale, launch = CASES[case]
    torch.manual_seed(0)
    q, k = torch.randn(q_shape, dtype=dtype), torch.randn(k_shape, dtype=dtype)
    v = torch.randn(*k_shape[:-1], ev, dtype=dtype)
    out, lse = flash_attention(q, k, v, is_causal=causal, scale=scale, **launch)
    grouped = q_shape[-3] != k_shape[-3]
    expected = F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale, enable_gqa=grouped)
    assert out.shape == expected.shape and out.dtype == dtype and out.is_contiguous()
    tolerance = {torch.float32: 1e-5, torch.float16: 2e-3, torch.bfloat16: 2e-2}[dtype]
    torch.testing.assert_close(out, expected, atol=tolerance, rtol=tolerance)
    keys = k.float().repeat_interleave(q_shape[-3] // k_shape[-3], -3) if grouped else k.float()
    scores = q.float() @ keys.transpose(-1, -2) * (q_shape[-1] ** -0.5 if scale is None else scale)
    if causal:  # torch's top-left alignment: query i sees keys 0..i
        scores = scores.masked_fill(torch.ones(scores.shape[-2:], dtype=torch.bool).tril().logical_not(), -torch.inf)
    assert lse.dtype == torch.float32 and lse.shape == q_shape[:-1]
    torch.testing.assert_close(lse, torch.logsumexp(scores, -1), atol=1e-4, rtol=1e-4)


def test_the_outputs_have_the_layouts_given_and_a_mask_or_dropout_is_refused():
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 3, 5, 6) for _ in range(3))
    out, lse = flash_attention(q, k, v, out_stride=(90, 6, 18, 1), lse_stride=(15, 1, 3))  # (B, L, H, E)-major
    assert out.stride() == (90, 6, 18, 1) and lse.stride() == (15, 1, 3)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v), atol=1e-5, rtol=1e-5)
    with pytest.raises(ValueError, match="takes no attn_mask"):
        flash_attention(q, k, v, attn_mask=torch.zeros(5, 5))
    with pytest.raises(ValueError, match=r"takes no dropout \(dropout_p=0.1\)"):
        flash_attention(q, k, v, dropout_p=0.1)


# what Inductor writes: on the CPU for level1/97 made causal, and on a GPU (the efficient-attention op, its output
# read in a (B, L, H, E)-major layout, and the logsumexp too)
CPU_CAUSAL = ("def call(args):\n    arg0_1, arg1_1, arg2_1 = args\n    args.clear()\n"
              "    buf0 = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default(arg0_1, arg1_1, arg2_1, "
              "0.0, True)\n    del arg0_1\n    buf1 = buf0[0]\n"
              "    assert_size_stride(buf1, (2, 2, 12, 6), (144, 72, 6, 1), 'torch.ops.aten._scaled_dot_product')\n"
              "    return (buf1, )\n")
GPU = ("def call(args):\n    arg0_1, arg1_1, arg2_1 = args\n    args.clear()\n"
       "    buf0 = aten._scaled_dot_product_efficient_attention.default(arg0_1, arg1_1, arg2_1, None, True, 0.0, "
       "True, scale=0.5)\n"
       "    buf1 = buf0[0]\n    buf2 = buf0[1]\n"
       "    assert_size_stride(buf1, (2, 2, 12, 6), (144, 6, 12, 1), 'torch.ops.aten._scaled_dot_product')\n"
       "    assert_size_stride(buf2, (2, 2, 12), (24, 1, 2), 'torch.ops.aten._scaled_dot_product')\n"
       "    del buf0\n    return (buf1, )\n")


def _launch(code: str):
    body = ast.parse(code).body[0].body
    attentions = Attentions(body, [1, 2, 4, 8], [1, 2, 3])
    return attentions, attentions.launch("buf0", body[2].value)


def test_a_library_attention_call_becomes_a_tunable_launch_of_kernelevos_flash_attention():
    launch_params = ("BLOCK_M=A0_BLOCK_M, BLOCK_N=A0_BLOCK_N, BLOCK_K=A0_BLOCK_K, VALUE_BLOCK=A0_VALUE_BLOCK, "
                     "num_warps=A0_NUM_WARPS, num_stages=A0_NUM_STAGES)")
    attentions, launch = _launch(CPU_CAUSAL)
    assert ast.unparse(launch) == ("flash_attention(arg0_1, arg1_1, arg2_1, is_causal=True, "
                                   "out_stride=(144, 72, 6, 1), " + launch_params)
    defaults = launcher_defaults()  # the launcher's own defaults, first
    assert dict(attentions.constants) == {f"A0_{p}": defaults[p] for p in defaults}
    assert all(defaults[p] in attentions.tunable[f"A0_{p}"] for p in defaults)
    assert attentions.tunable["A0_NUM_WARPS"] == sorted({1, 2, 4, 8, defaults["NUM_WARPS"]})
    _, launch = _launch(GPU)
    assert ast.unparse(launch) == ("flash_attention(arg0_1, arg1_1, arg2_1, is_causal=True, scale=0.5, "
                                   "out_stride=(144, 6, 12, 1), "
                                   "lse_stride=(24, 1, 2), " + launch_params)
    for name in ("_scaled_dot_product_flash_attention", "_scaled_dot_product_cudnn_attention"):
        assert attention_op(f"torch.ops.aten.{name}.default") == name == attention_op(f"aten.{name}")
    assert attention_op("torch.ops.aten.bmm.default") is None and attention_op("torch.ops.aten._sdpa_x") is None
    assert 'input_precision="tf32"' in kernel_source(tf32=True) and "tf32" not in kernel_source()


CALL = "(arg0_1, arg1_1, arg2_1, 0.0, True)"


@pytest.mark.parametrize("written, why", [
    ((CALL, "(arg0_1, arg1_1, arg2_1, attn_mask=arg3_1)"), r"passes an attention mask \(attn_mask=arg3_1\)"),
    ((CALL, "(arg0_1, arg1_1, arg2_1, 0.1)"), r"asks for dropout \(dropout_p=0.1\)"),
    ((CALL, "(arg0_1, arg1_1, arg2_1, spin=3)"), "passes spin, which is not an argument of "
                                                 "aten._scaled_dot_product_flash_attention_for_cpu"),
    ((CALL, "(arg0_1, arg1_1)"), "does not give aten._scaled_dot_product_flash_attention_for_cpu's query, key and "
                                 "value"),
    (("buf0[0]", "buf0[2]"), r"reads buf0\[2\] of .*: kernelevo's flash attention gives only the output"),
    (("return (buf1, )", "return (buf1, buf0)"), "uses the tuple buf0 of .* whole"),
])
def test_an_attention_call_flash_attention_cannot_compute_is_refused_with_why(written, why):
    with pytest.raises(AttentionRefused, match=why):
        _launch(CPU_CAUSAL.replace(*written))


def test_where_the_librarys_attention_stays_it_is_torchs_public_function_which_a_candidate_may_call():
    masked = CPU_CAUSAL.replace("0.0, True)", "0.0, True, attn_mask=arg3_1)")
    body = ast.parse(masked).body[0].body
    kept = Attentions(body, [1], [1], own=False)  # policy kernelbench, or to name the call
    library = ast.unparse(kept.rewrite("buf0", body[2].value))
    assert library == ("(torch.nn.functional.scaled_dot_product_attention(arg0_1, arg1_1, arg2_1, attn_mask=arg3_1, "
                       "dropout_p=0.0, is_causal=True),)") and kept.count == 0
    assert check_source(f"import torch\nbuf0 = {library}\n") == []
    assert check_source("import torch\nbuf0 = " + ast.unparse(body[2].value) + "\n")  # torch.ops: refused
    body = ast.parse(GPU).body[0].body
    with pytest.raises(SeedError, match=r"reads buf0\[1\] of .*: torch.nn.functional.scaled_dot_product_attention "
                                        r"gives only the output \[0\]"):
        Attentions(body, [1], [1], own=False).rewrite("buf0", body[2].value)


def _captured(code: str) -> dict:
    return {"code": code, "args": [{"kind": "input", "index": i} for i in range(3)], "kernels": {},
            "single_output": True, "device": "cpu"}


def _module(source: str, tmp_path):
    path = tmp_path / "seed.py"  # @triton.jit reads its source from a file
    path.write_text(source)
    loader = importlib.util.spec_from_file_location("attention_seed", path)
    module = importlib.util.module_from_spec(loader)
    loader.loader.exec_module(module)
    return module


@pytest.mark.parametrize("code, kwargs", [(CPU_CAUSAL, {"is_causal": True}), (GPU, {"is_causal": True, "scale": 0.5})])
def test_the_converted_forward_computes_the_attention_in_the_layout_inductor_asserts(code, kwargs, tmp_path):
    spec = resolve_problem(str(SDPA))
    source = seeds._checked_source(spec, _captured(code), torch_compute_allowed=False)
    assert seeds.library_calls(source) == [] and "flash_attention(" in source
    assert {"A0_BLOCK_M", "A0_VALUE_BLOCK", "A0_NUM_STAGES"} <= set(Genome.from_source(source).space)
    torch.manual_seed(0)
    q, k, v = (torch.rand(2, 2, 12, 6) for _ in range(3))
    got = _module(source, tmp_path).ModelNew()(q, k, v)
    assert got.stride() == ((144, 72, 6, 1) if code is CPU_CAUSAL else (144, 6, 12, 1))
    torch.testing.assert_close(got, F.scaled_dot_product_attention(q, k, v, **kwargs), atol=1e-5, rtol=1e-5)


def test_an_attention_call_kernelevos_cannot_take_is_named_in_one_line_with_why():
    spec = resolve_problem(str(SDPA))
    masked = CPU_CAUSAL.replace("0.0, True)", "attn_mask=arg2_1)")
    with pytest.raises(SeedError) as refused:
        seeds._checked_source(spec, _captured(masked), torch_compute_allowed=False)
    message = str(refused.value)
    assert "\n" not in message and "fitness/policy=kernelbench" in message
    assert "calls library kernels (torch.nn.functional.scaled_dot_product_attention)" in message  # as a seed keeps it
    assert "; kernelevo's Triton flash attention could not take it: Inductor's torch.ops.aten._scaled_dot_product_" \
        "flash_attention_for_cpu.default(arg0_1, arg1_1, arg2_1, attn_mask=arg2_1) passes an attention mask" in message
    with pytest.raises(SeedError, match="Inductor generated no Triton kernel"):  # not "calls the ATen operator"
        convert(_captured(CPU_CAUSAL), SDPA.read_text(), "sdpa")  # the library's call is kept: there is nothing else
    # policy kernelbench keeps library calls, but where Inductor wrote nothing else it takes kernelevo's attention too
    assert "flash_attention(arg0_1" in seeds._checked_source(spec, _captured(CPU_CAUSAL), torch_compute_allowed=True)


@pytest.mark.slow
def test_level1_97s_form_gets_a_seed_of_kernelevos_flash_attention_that_policy_triton_judges_correct(tmp_path, sandbox):
    spec = resolve_problem(str(SDPA))  # level1/97 at interpreter sizes, head dim 6
    source = seeds.inductor_seed(spec, "cpu", "cpu_interpreter", tmp_path / "cache")  # torch.compile's, converted
    assert "Captured with dynamic shapes" in source and "flash_attention(" in source
    assert seeds.library_calls(source) == [] and "_scaled_dot_product" not in source.split("class ModelNew")[1]
    with make_evaluator(problem=str(SDPA), sandbox=sandbox) as ev:
        result = ev.evaluate(source, label="inductor")
    assert result.status == "ok" and result.guards["torch_compute_ops"] == [], result.reason
