"""kernelevo's transposed convolution split by output phase (kernelevo/seeds/kernels/conv.py): every kind of transposed
convolution against torch.nn.functional.conv_transpose{1,2,3}d through Triton's interpreter, and the work its
launches do: each output position visits exactly the kernel taps the stride lets contribute to it (those k with
(o + padding - k * dilation) % stride == 0), where the gather form visited the whole window; the implicit GEMM
and the direct path (tests/seeds/test_conv_direct.py) alike."""
import itertools
import math

import pytest
import torch
import torch.nn.functional as F

import kernelevo.seeds.kernels.conv as conv
from kernelevo.seeds.kernels.conv import conv_nd

# dims, in channels, out channels, kernel, stride, padding, dilation, groups, output_padding, bias, input size
CASES = {
    "1d stride 3 dilated padded out-padded": (1, 2, 3, 4, 3, 2, 2, 1, 2, True, (5,)),
    "1d stride 2 dilation 2: phases without taps write the bias": (1, 2, 2, 3, 2, 1, 2, 1, 1, True, (5,)),
    "2d stride 1: one phase": (2, 3, 4, (3, 2), 1, (1, 0), (1, 2), 1, 0, True, (4, 5)),
    "2d stride (3, 2) dilation (1, 2) grouped": (2, 4, 6, (2, 3), (3, 2), (1, 0), (1, 2), 2, (2, 1), False, (3, 4)),
    "3d strided dilated grouped out-padded": (3, 3, 6, (2, 3, 2), (2, 3, 1), (1, 0, 1), (1, 1, 2), 3, (1, 2, 0),
                                              True, (3, 2, 3)),
    "3d stride 2 dilation 2: phases without taps write zeros": (3, 2, 2, 2, 2, 0, 2, 1, 1, False, (2, 2, 2)),
}
TILES = dict(BLOCK_M=16, BLOCK_N=8, BLOCK_K=8)


def _dims(value, dims: int) -> tuple:
    return tuple(value) if isinstance(value, tuple) else (value,) * dims


def _problem(case):
    dims, c_in, c_out, kernel, stride, padding, dilation, groups, output_padding, bias, size = CASES[case]
    torch.manual_seed(0)
    x = torch.randn(2, c_in, *size)
    weight = torch.randn(c_in, c_out // groups, *_dims(kernel, dims))
    b = torch.randn(c_out) if bias else None
    return x, weight, b, [_dims(v, dims) for v in (stride, padding, dilation, output_padding)], groups


@pytest.mark.parametrize("case", CASES)
def test_the_phase_split_transposed_convolution_computes_what_torch_does(case):
    x, weight, b, (stride, padding, dilation, output_padding), groups = _problem(case)
    functional = {1: F.conv_transpose1d, 2: F.conv_transpose2d, 3: F.conv_transpose3d}[x.dim() - 2]
    expected = functional(x, weight, b, stride, padding, output_padding, groups, dilation)
    got = conv_nd(x, weight, b, stride, padding, dilation, True, output_padding, groups, **TILES,
                  direct=False)  # the GEMM path (the direct one: tests/seeds/test_conv_direct.py)
    assert got.shape == expected.shape and got.is_contiguous()
    torch.testing.assert_close(got, expected, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("direct", [False, True])  # the GEMM, the direct path
@pytest.mark.parametrize("case", CASES)
def test_rows_gathered_not_split_by_phase_compute_what_torch_does_in_fewer_launches(case, direct, monkeypatch):
    x, weight, b, (stride, padding, dilation, output_padding), groups = _problem(case)
    functional = {1: F.conv_transpose1d, 2: F.conv_transpose2d, 3: F.conv_transpose3d}[x.dim() - 2]
    expected = functional(x, weight, b, stride, padding, output_padding, groups, dilation)
    name = "conv_direct_kernel" if direct else "conv_nd_kernel"
    recorded = RecordedLaunches(getattr(conv, name))
    monkeypatch.setattr(conv, name, recorded)
    got = conv_nd(x, weight, b, stride, padding, dilation, True, output_padding, groups, **TILES, W_PHASES=0,
                  direct=direct)
    torch.testing.assert_close(got, expected, atol=1e-4, rtol=1e-4)
    lead = (1,) * (3 - len(stride))
    split = [len(conv.axis_phases(*a, True)) for a in zip((1,) * len(lead) + tuple(expected.shape[2:]),
                                                          lead + weight.shape[2:], lead + stride, (0,) * len(lead)
                                                          + padding, lead + dilation)]
    assert len(recorded.launches) == split[0] * split[1]  # the rows' phases only: one gathering launch each
    assert {launch["iw_div"] for launch in recorded.launches} == {(lead + stride)[2]}
    assert {launch["QW"] for launch in recorded.launches} == {expected.shape[-1]}  # every output of a row


class RecordedLaunches:
    """Stands for ``conv_nd_kernel``: records each launch's arguments by name, then launches the kernel."""

    def __init__(self, kernel):
        self.kernel, self.launches = kernel, []

    def __getitem__(self, grid):
        def launch(*args, **kwargs):
            self.launches.append(dict(zip(self.kernel.arg_names, args)))
            return self.kernel[grid](*args, **kwargs)
        return launch


def _contributing_taps(out_sizes, kernel, stride, padding, dilation) -> torch.Tensor:
    """Per output position (3D), how many kernel taps the stride lets contribute: counted one by one."""
    count = torch.zeros(out_sizes, dtype=torch.long)
    for o in itertools.product(*map(range, out_sizes)):
        count[o] = sum(all((o[a] + padding[a] - k[a] * dilation[a]) % stride[a] == 0 for a in range(3))
                       for k in itertools.product(*map(range, kernel)))
    return count


# dims, kernel, stride, dilation, padding, output_padding, input size; the first three: a kernel the stride divides
WORK = {
    "2d stride 2": (2, 4, 2, 1, 1, 1, (3, 4)),
    "1d stride 3": (1, 3, 3, 1, 0, 2, (4,)),
    "3d stride 2": (3, 2, 2, 1, 0, 0, (2, 3, 2)),
    "2d stride (3, 2) dilation (2, 2)": (2, (4, 3), (3, 2), 2, (1, 2), (1, 1), (3, 3)),
}


@pytest.mark.parametrize("kernel_name", ["conv_nd_kernel", "conv_direct_kernel"])  # the GEMM, the direct path
@pytest.mark.parametrize("case", WORK)
def test_each_output_position_visits_only_the_taps_that_contribute_to_it(case, kernel_name, monkeypatch):
    dims, kernel, stride, dilation, padding, output_padding, size = WORK[case]
    kernel, stride, dilation, padding, output_padding = (_dims(v, dims) for v in
                                                         (kernel, stride, dilation, padding, output_padding))
    torch.manual_seed(0)
    x, weight = torch.randn(1, 2, *size), torch.randn(2, 3, *kernel)
    recorded = RecordedLaunches(getattr(conv, kernel_name))
    monkeypatch.setattr(conv, kernel_name, recorded)
    got = conv_nd(x, weight, None, stride, padding, dilation, True, output_padding, 1, **TILES,
                  direct=kernel_name == "conv_direct_kernel")
    functional = {1: F.conv_transpose1d, 2: F.conv_transpose2d, 3: F.conv_transpose3d}[dims]
    torch.testing.assert_close(got, functional(x, weight, None, stride, padding, output_padding, 1, dilation),
                               atol=1e-4, rtol=1e-4)  # the recorded launches are the whole computation

    lead = 3 - dims
    out_sizes = (1,) * lead + tuple(got.shape[2:])
    visits = torch.zeros(out_sizes, dtype=torch.long)  # launches writing each output position
    taps = torch.zeros(out_sizes, dtype=torch.long)  # taps the launch writing it visited
    for launch in recorded.launches:
        positions = [range(launch[f"o{a}0"], launch[f"o{a}0"] + launch[f"Q{a.upper()}"] * launch[f"o{a}_step"],
                           launch[f"o{a}_step"]) for a in "dhw"]
        index = torch.meshgrid(*[torch.tensor(p) for p in positions], indexing="ij")
        visits[index] += 1
        taps[index] = math.prod(launch[f"T{a.upper()}"] for a in "DHW")
        assert launch["C_in_g"] == 2  # the reduction: the group's input channels x those taps
    assert (visits == 1).all()  # the phases partition the output
    expected = _contributing_taps(out_sizes, (1,) * lead + kernel, (1,) * lead + stride, (0,) * lead + padding,
                                  (1,) * lead + dilation)
    assert torch.equal(taps, expected)
    gather = math.prod(out_sizes) * math.prod(kernel)  # the gather form: every output position, the whole window
    if dilation == (1,) * dims and all(k % s == 0 for k, s in zip(kernel, stride)):
        assert gather == math.prod(stride) * int(taps.sum())
    else:  # stride and dilation share a factor: some phases have no taps at all
        assert int(taps.sum()) < gather and (taps == 0).any()
