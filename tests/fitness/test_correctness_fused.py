"""The one-pass comparison kernel (fitness/comparison/fused_compare.py) judges exactly as the torch path: the same
verdict, message and statistics on random outputs with NaN/inf in either tensor, errors at the tolerance's boundary,
every float dtype, several programs; the torch path wherever the kernel does not run, or did not run. On the CPU the
kernel runs in Triton's interpreter; on a GPU (KERNELEVO_TEST_DEVICE=cuda) compiled."""
import math

import pytest
import torch

from fitness.comparison import correctness, fused_compare
from fitness.comparison.policy import Tolerance

DEVICES = [d for d, usable in (("cpu", fused_compare.INTERPRETED),
                               ("cuda", torch.cuda.is_available() and not fused_compare.INTERPRETED)) if usable]
FLOATS = (torch.float32, torch.float16, torch.bfloat16, torch.float64)
TOLS = (Tolerance(1e-3, 1e-3, None), Tolerance(1e-5, 1e-5, 1e-4), Tolerance(2 ** -10, 2 ** -8, 1e-2),
        Tolerance(0.0, 1e-2, None), Tolerance(1e-3, 1e-3, 1e-4))


def both(out, ref, tol):
    """(fused, torch) comparisons; the fused one must have come from the kernel (its statistics seen on their way
    to the comparison: the kernel runs once, in the interpreter the longest step of these tests)."""
    seen = []

    def watched(*args, **kwargs):
        seen.append(fused_compare.fused_stats(*args, **kwargs))
        return seen[-1]

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(correctness, "fused_stats", watched)
        fused = correctness.compare_tensor(out, ref, tol, fused=True)
    assert len(seen) == 1 and seen[0] is not None
    return fused, correctness.compare_tensor(out, ref, tol, fused=False)


def assert_same(fused, plain):
    assert (fused.ok, fused.reason) == (plain.ok, plain.reason)
    assert fused.max_abs_err == plain.max_abs_err and fused.max_rel_err == plain.max_rel_err
    assert fused.rel_l2 == pytest.approx(plain.rel_l2, rel=1e-9, abs=0) or (math.isnan(fused.rel_l2)
                                                                            and math.isnan(plain.rel_l2))


def random_case(gen: torch.Generator, device: str):
    """(out, ref, tol): a reference, an output near it, some elements near or past the tolerance's boundary, and
    NaN/inf in either, sometimes at the same positions."""
    dtype = FLOATS[int(torch.randint(len(FLOATS), (1,), generator=gen))]
    tol = TOLS[int(torch.randint(len(TOLS), (1,), generator=gen))]
    n = int(torch.randint(1, 600, (1,), generator=gen))  # up to three blocks of the kernel (several programs: below)
    ref64 = torch.randn(n, generator=gen, dtype=torch.float64) * 10 ** float(torch.randint(-3, 3, (1,), generator=gen))
    threshold = tol.atol + tol.rtol * ref64.abs()
    factor = torch.tensor([0.0, 0.5, 0.999, 1.0, 1.001, 2.0], dtype=torch.float64)
    pick = torch.randint(len(factor), (n,), generator=gen)
    near = torch.rand(n, generator=gen) < float(torch.rand(1, generator=gen) < 0.5) * 0.02
    sign = torch.where(torch.rand(n, generator=gen) < 0.5, -1.0, 1.0).double()
    spread = 1e-7 if float(torch.rand(1, generator=gen)) < 0.5 else 0.9 * tol.rtol  # often past max_rel_l2
    out64 = ref64 + torch.where(near, sign * factor[pick] * threshold,
                                spread * ref64 * (2 * torch.rand(n, generator=gen, dtype=torch.float64) - 1))
    ref, out = ref64.to(dtype), out64.to(dtype)
    specials = torch.tensor([float("nan"), float("inf"), -float("inf")], dtype=dtype)
    for tensor in (ref, out):
        if float(torch.rand(1, generator=gen)) < 0.2:
            where = torch.randint(n, (int(torch.randint(1, 4, (1,), generator=gen)),), generator=gen)
            tensor[where] = specials[torch.randint(3, (len(where),), generator=gen)]
    if float(torch.rand(1, generator=gen)) < 0.2:  # the same non-finite values in both: not a mismatch
        where = torch.randint(n, (2,), generator=gen)
        ref[where] = out[where] = specials[torch.randint(3, (2,), generator=gen)]
    return out.to(device), ref.to(device), tol


@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")  # the interpreter's numpy: inf - inf
@pytest.mark.parametrize("device", DEVICES)
def test_random_outputs_get_the_torch_paths_verdict_message_and_statistics(device):
    gen = torch.Generator().manual_seed(1234)
    verdicts = set()
    for _ in range(60):
        out, ref, tol = random_case(gen, device)
        fused, plain = both(out, ref, tol)
        assert_same(fused, plain)
        verdicts.add(next((kind for kind in ("non-finite", "exceed atol", "normwise") if kind in plain.reason), "ok"))
    assert verdicts == {"ok", "non-finite", "exceed atol", "normwise"}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
def test_an_error_exactly_at_the_tolerance_passes_and_one_step_past_it_fails(device, dtype):
    tol = Tolerance(2 ** -4, 2 ** -3, None)  # out = ref +- (atol + rtol * |ref|) is exact in every dtype here
    ref = torch.tensor([1.0, -2.0, 4.0, 0.0], dtype=dtype, device=device)
    at = ref + torch.tensor([1, -1, 1, -1], dtype=dtype, device=device) * (tol.atol + tol.rtol * ref.abs())
    assert at.tolist() == [1.1875, -2.3125, 4.5625, -0.0625]
    fused, plain = both(at, ref, tol)
    assert fused.ok and plain.ok
    bits = {torch.float64: torch.int64, torch.float32: torch.int32}.get(dtype, torch.int16)
    past = at.clone()
    past[2:3] = (at[2:3].view(bits) + 1).view(dtype)  # the dtype's next value above 4.5625
    fused, plain = both(past, ref, tol)
    assert not plain.ok and "1 of 4 elements" in plain.reason and "index (2,)" in plain.reason
    assert_same(fused, plain)


@pytest.mark.parametrize("device", DEVICES)
def test_several_programs_find_the_same_first_bad_element_as_the_chunked_torch_path(device, monkeypatch):
    monkeypatch.setattr(fused_compare, "BLOCK", 16)
    monkeypatch.setattr(fused_compare, "MAX_PROGRAMS", 3)  # 3 programs of 7 steps of 16 over 300 elements
    monkeypatch.setattr(correctness, "CHUNK_ELEMENTS", 7)
    torch.manual_seed(0)
    ref = torch.randn(10, 30, device=device)
    out = ref + 1e-6
    out[6, 11] += 1.0  # element 191: the second program's
    out[9, 2] -= 0.5
    fused, plain = both(out, ref, Tolerance(1e-3, 1e-3, None))
    assert "2 of 300 elements" in plain.reason and "first at index (6, 11)" in plain.reason
    assert_same(fused, plain)
    stats = fused_compare.fused_stats(out.reshape(-1), ref.reshape(-1), Tolerance(1e-3, 1e-3), True)
    assert stats.span == 112 and stats.rows[:, fused_compare.STATS.index("bad")].tolist() == [0.0, 1.0, 1.0]


@pytest.mark.parametrize("device", DEVICES)
def test_unaligned_and_strided_outputs_are_compared_as_they_are(device):
    torch.manual_seed(1)
    ref = torch.randn(65, 33, device=device)
    base = torch.empty(65 * 33 + 1, device=device)
    unaligned = base[1:].view(65, 33)  # 4 bytes past an aligned start
    unaligned.copy_(ref)
    unaligned[64, 32] += 1.0
    assert unaligned.data_ptr() % fused_compare.ALIGN
    assert_same(*both(unaligned, ref, Tolerance(1e-4, 1e-4)))
    transposed = ref.t().contiguous().t()  # same values, column-major
    transposed[3, 5] = float("nan")
    assert not transposed.is_contiguous()
    assert_same(*both(transposed, ref, Tolerance(1e-4, 1e-4)))


def test_a_launch_that_never_ran_is_no_clean_comparison(monkeypatch):
    class NoLaunch:  # a launcher that returns without running anything: every row stays NaN
        def __getitem__(self, grid):
            return lambda *args, **kwargs: None

    monkeypatch.setattr(fused_compare, "_compare_kernel", NoLaunch())
    monkeypatch.setattr(fused_compare, "can_run", lambda *args: True)
    ref = torch.randn(100)
    out = ref + 1.0
    assert fused_compare.fused_stats(out, ref, Tolerance(1e-3, 1e-3), interpreter=True) is None
    result = correctness.compare_tensor(out, ref, Tolerance(1e-3, 1e-3), fused=True)  # judged in torch instead
    assert not result.ok and "100 of 100 elements" in result.reason


def test_the_kernel_runs_only_where_it_should():
    f32 = torch.zeros(4)
    assert not fused_compare.can_run(f32, f32)  # the CPU keeps the torch path unless the tests ask for the kernel
    assert fused_compare.can_run(f32, f32, interpreter=True) == fused_compare.INTERPRETED
    for dtype in (torch.int32, torch.int64, torch.bool, torch.complex64, torch.uint8):
        t = torch.zeros(4, dtype=dtype)
        assert not fused_compare.can_run(t, t, interpreter=True)
    assert not fused_compare.can_run(f32, f32.double(), interpreter=True)
    ints = torch.arange(6)
    assert correctness.compare_tensor(ints, ints, Tolerance(0.0, 0.0), fused=True).ok
    assert "1 of 6 elements" in correctness.compare_tensor(ints + (ints == 3), ints, Tolerance(0.0, 0.0),
                                                           fused=True).reason


def test_an_empty_output_passes_without_a_launch():
    empty = torch.zeros(0, 3)
    assert fused_compare.fused_stats(empty, empty, Tolerance(1e-3, 1e-3), interpreter=True) is None
    assert correctness.compare_tensor(empty, empty, Tolerance(1e-3, 1e-3), fused=True).ok


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64])
def test_subnormal_values_are_compared_not_flushed_to_zero(device, dtype):
    tiny = torch.finfo(dtype).smallest_normal / 4  # subnormal in `dtype`
    ref = torch.tensor([tiny, -tiny, 1.0], dtype=dtype, device=device)
    out = torch.tensor([0.0, -tiny, 1.0], dtype=dtype, device=device)
    fused, plain = both(out, ref, Tolerance(0.0, 0.5, None))  # |0 - tiny| > 0.5 * tiny
    assert not plain.ok and "1 of 3 elements" in plain.reason
    assert_same(fused, plain)
