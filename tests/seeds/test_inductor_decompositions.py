"""The capture's own decompositions and switches (kernelevo/seeds/inductor/decompositions.py), for the ATen operators
Inductor
called directly in KernelBench (issue 43): average pooling with a window over 25 elements that is not its stride
(level1/46) computes what ATen's does in every argument it takes, and is left to Inductor where Inductor writes Triton
itself; nn.TransformerEncoderLayer's and nn.MultiheadAttention's fused fast path is off while the capture traces; and
a model with both (tests/problems/pool_encoder.py) gets an Inductor seed whose pooling is a Triton kernel and which
the evaluator judges correct."""
import itertools

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode

from conftest import PROBLEMS, make_evaluator
from fitness.problems.problem import resolve_problem
from kernelevo.seeds import inductor as seeds
from kernelevo.seeds.inductor.convert import convert
from kernelevo.seeds.inductor.decompositions import MIN_PART, avg_pool, capture_decompositions, slow_paths, split_sum

# input shape, kernel, stride, padding: every window over 25 elements and not its stride
POOLS = {
    "level1/46: 3x3x3 at stride 2, padded": ((2, 3, 5, 6, 7), [3, 3, 3], [2, 2, 2], [1, 1, 1]),
    "3d, unbatched, uneven window": ((3, 5, 8, 7), [3, 4, 3], [1, 2, 3], [1, 2, 0]),
    "2d, 6x5 at stride (2, 3)": ((2, 2, 11, 9), [6, 5], [2, 3], [3, 2]),
    "1d as Inductor sees it: (1, 30) at stride 2": ((2, 3, 1, 64), [1, 30], [1, 2], [0, 4]),
}


@pytest.mark.parametrize("case", POOLS)
def test_the_average_pooling_decomposition_computes_atens_in_every_argument(case):
    shape, kernel, stride, padding = POOLS[case]
    dims = len(kernel)
    torch.manual_seed(0)
    x = torch.randn(shape, dtype=torch.float64)
    for ceil_mode, count_include_pad, divisor in itertools.product([False, True], [True, False], [None, 5]):
        args = (kernel, stride, padding, ceil_mode, count_include_pad, divisor)
        expected = getattr(F, f"avg_pool{dims}d")(x, *args)
        got = avg_pool(x, *args, dims=dims)
        assert got.shape == expected.shape and got.dtype == x.dtype, args
        torch.testing.assert_close(got, expected, rtol=1e-12, atol=1e-12, msg=lambda m: f"{args}: {m}")
    half = avg_pool(x.half(), kernel, stride, padding, True, False, dims=dims)  # summed in fp32, as ATen does
    assert half.dtype == torch.float16
    expected = getattr(F, f"avg_pool{dims}d")(x.half().double(), kernel, stride, padding, True, False)
    torch.testing.assert_close(half.double(), expected, rtol=1e-3, atol=1e-3)


def test_windows_inductor_writes_triton_for_itself_are_left_to_it():
    x = torch.randn(2, 3, 8, 8, 8)
    assert avg_pool(x, [3, 3, 2], [2, 2, 2], [1, 1, 1], dims=3) is NotImplemented  # 18 elements: unrolled
    assert avg_pool(x, [3, 3, 3], [3, 3, 3], [0, 0, 0], dims=3) is NotImplemented  # window = stride: a reduction
    assert avg_pool(x, [3, 3, 3], [], [0, 0, 0], dims=3) is NotImplemented  # no stride: the window's
    table = capture_decompositions()
    assert table[torch.ops.aten.avg_pool3d.default].func is avg_pool
    assert torch.ops.aten.avg_pool1d.default in table  # Inductor's own: to avg_pool2d, which the capture's takes


class _Ops(TorchDispatchMode):
    """The names of the ATen operators a call runs."""

    def __init__(self):
        super().__init__()
        self.names = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.names.add(func.overloadpacket.__name__)
        return func(*args, **(kwargs or {}))


def _ops(module, *inputs) -> set:
    with torch.no_grad(), _Ops() as ops:
        module(*inputs)
    return ops.names


@pytest.mark.filterwarnings("ignore:The PyTorch API of nested tensors")  # the fast path's own, asserted taken below
def test_the_fused_fast_path_of_encoders_and_attention_is_off_while_capturing_and_restored_after():
    layer = nn.TransformerEncoderLayer(d_model=8, nhead=2, dim_feedforward=16, dropout=0.0, batch_first=True).eval()
    attention = nn.MultiheadAttention(8, 2, batch_first=True).eval()
    encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=True).eval()
    x, padded = torch.randn(2, 3, 8), torch.tensor([[False, False, True]] * 2)
    fused = {"_transformer_encoder_layer_fwd", "_native_multi_head_attention", "_nested_tensor_from_mask"}
    assert "_transformer_encoder_layer_fwd" in _ops(layer, x)
    assert "_native_multi_head_attention" in _ops(lambda q: attention(q, q, q, need_weights=False), x)
    assert "_nested_tensor_from_mask" in _ops(lambda q: encoder(q, src_key_padding_mask=padded), x)
    with slow_paths():
        assert not torch.backends.mha.get_fastpath_enabled()
        assert not _ops(layer, x) & fused and "layer_norm" in "".join(_ops(layer, x))
        assert not _ops(lambda q: attention(q, q, q, need_weights=False), x) & fused
        assert not _ops(lambda q: encoder(q, src_key_padding_mask=padded), x) & fused
    assert torch.backends.mha.get_fastpath_enabled()
    with pytest.raises(RuntimeError, match="inside"), slow_paths():
        raise RuntimeError("inside")
    assert torch.backends.mha.get_fastpath_enabled()  # restored after a failure too


@pytest.mark.slow
def test_level1_46s_pooling_and_level3_32s_encoder_layer_get_a_seed_the_evaluator_judges_correct(sandbox):
    spec = resolve_problem(str(PROBLEMS / "pool_encoder.py"))
    captured = seeds.capture(spec, "cpu")
    assert "torch.ops.aten.avg_pool3d" not in captured["code"] and "_transformer_encoder_layer_fwd" not in \
        captured["code"]
    assert any("avg_pool3d" in name for name in captured["kernels"])  # the pooling, one of Inductor's kernels
    source = convert(captured, open(spec.path).read(), spec.name)
    assert seeds.library_calls(source) == ["torch.addmm", "torch.mm",  # the CPU's linears; on a GPU, templates
                                           "torch.nn.functional.scaled_dot_product_attention"]
    with make_evaluator(problem=spec.path, policy="kernelbench", sandbox=sandbox, trials=2) as ev:
        result = ev.correctness(source, label="inductor")  # its trials and guards: nothing here is timed
    assert result.status == "ok", result.reason


SPLIT = {"decompositions": {"split_outer_reductions": 4}}  # conf/inductor/variants.yaml's split_reductions


@pytest.mark.parametrize("length", [1024, 1031])  # a multiple of the parts, and one padded to the next
def test_a_split_outer_sum_or_mean_is_the_reductions_result_at_any_length(length):
    torch.manual_seed(0)
    x = torch.randn(3, length, 5, dtype=torch.float64)
    for mean, reduce in ((False, torch.sum), (True, torch.mean)):
        for keepdim in (False, True):
            got = split_sum(x, [1], keepdim, parts=4, mean=mean)
            torch.testing.assert_close(got, reduce(x, 1, keepdim=keepdim), rtol=1e-12, atol=1e-12)
    half = split_sum(x.half(), [-2], parts=4, mean=True)  # partial sums in fp32, the result in the input's dtype
    assert half.dtype == torch.float16
    torch.testing.assert_close(half.double(), x.half().double().mean(1), rtol=1e-3, atol=1e-3)


def test_reductions_a_split_would_not_help_are_left_to_inductor():
    x = torch.randn(2, 1024, 6)
    assert split_sum(x, [2], parts=4) is NotImplemented  # the innermost dimension (stride 1)
    assert split_sum(x[:, :1000], [1], parts=4) is NotImplemented  # under MIN_PART per part
    assert split_sum(x, [0, 1], parts=4) is NotImplemented  # more than one dimension
    assert split_sum(x.long(), [1], parts=4) is NotImplemented  # not floating point
    assert split_sum(x, [1], parts=4, mean=True) is not NotImplemented and MIN_PART * 4 <= 1024
    assert capture_decompositions(split_outer_reductions=4)[torch.ops.aten.mean.dim].func is split_sum
    assert torch.ops.aten.mean.dim not in capture_decompositions()  # the variant's only


def test_the_split_reductions_variant_is_a_seed_of_one_kernel_more_correct_at_other_sizes(sandbox):
    # level1/48's shape, small: a reduction over the middle dimension
    sizes = {"batch_size": 2, "dim1": 1024, "dim2": 300}
    spec = resolve_problem("sum_reduction", sizes=sizes)
    got = seeds.capture_variants(spec, "cpu", variants={"default": {}, "split": SPLIT}, dynamic=True)
    assert got["default"]["dynamic"] and got["split"]["dynamic"]
    # one kernel more: the parts' partial sums, then their sum (Inductor splits a small output itself: one kernel
    # when its output is at least 64 per SM, here per core)
    assert len(got["split"]["kernels"]) == len(got["default"]["kernels"]) + 1
    source = convert(got["split"], open(spec.path).read(), spec.name)
    other = {"batch_size": 3, "dim1": 1029, "dim2": 7}  # 1029: not a multiple of the parts, so zero-padded
    with make_evaluator(problem="sum_reduction", sizes=other, sandbox=sandbox, trials=2) as ev:
        result = ev.correctness(source, label="inductor:split_reductions")
    assert result.status == "ok", result.reason
