"""Which inputs and parameters the output depends on, decided with one backward pass first: a network's tensors with
a nonzero gradient need no forward each (on 4 x H200, 15 problems at once, level3/23's perturbation forward by
forward kept its evaluator from starting for 1,402 s). Where the perturbation sees a change the decision is its
own; the bench gives each problem process its share of the host's cores."""
import os

import pytest

from evo.benchmark import bench
from fitness.problems.dependence import DRAWS, PROBES, find_dependence
from fitness.problems.problem import load_problem, resolve_problem

NETWORK = '''
import torch
import torch.nn as nn

CALLS = [0]


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.Sequential(*[nn.Sequential(nn.Linear(8, 8), nn.BatchNorm1d(8), nn.ReLU()) for _ in range(6)])
        self.unused = nn.Linear(8, 8)
        self.dead = nn.Parameter(torch.full((8,), -1.0))  # behind a ReLU that is off: a zero gradient

    def forward(self, x, idx, ignored):
        CALLS[0] += 1
        x = x.relu_() if INPLACE else x
        x = torch.from_numpy(x.numpy()) if UNGRADABLE else x  # no gradient through numpy: autograd raises
        h = self.layers(x)
        return h + torch.relu(h * 0.01 + self.dead) + idx.float().unsqueeze(1)


INPLACE = UNGRADABLE = False


def get_inputs():
    return [torch.randn(4, 8), torch.randint(0, 5, (4,)), torch.randn(4, 8)]


def get_init_inputs():
    return []
'''


def network(tmp_path, inplace=False, ungradable=False):
    path = tmp_path / "network.py"
    path.write_text(NETWORK.replace("INPLACE = UNGRADABLE = False", f"INPLACE, UNGRADABLE = {inplace}, {ungradable}"))
    return load_problem(resolve_problem(str(path)))


def decided(loaded, gradient):
    loaded.module.CALLS[0] = 0
    dependence = find_dependence(loaded, ("x", "idx", "ignored"), gradient=gradient)
    return dependence, loaded.module.CALLS[0]


@pytest.mark.parametrize("inplace", [False, True])
def test_the_gradient_decides_as_the_perturbation_does_with_a_forward_only_for_what_it_cannot_show(tmp_path, inplace):
    """In-place operations in the forward (on an input too: level3/26_ShuffleNet's) leave the gradient usable."""
    loaded = network(tmp_path, inplace)
    by_gradient, forwards = decided(loaded, gradient=True)
    alone, perturbed = decided(loaded, gradient=False)
    assert by_gradient == alone
    assert by_gradient.inputs == (True, True, False) and by_gradient.ignored_inputs == ["ignored"]
    assert by_gradient.ignored_parameters == ("unused.weight", "unused.bias")  # `dead` counts: a big change revives it
    # two reference forwards per draw and the backward's; then a forward each for what no gradient shows: the integer
    # input, the ignored one, `dead` and the unused layer's two, then the three still unused; then the ignored input
    # under each probe beyond the draw (none moves it)
    assert forwards == 2 * DRAWS + 1 + (3 + 2) + 3 * (DRAWS - 1) + len(PROBES)
    # alone, the perturbation takes a forward for x, each of the 24 linear and batch norm weights and biases, and the
    # batch norms' 12 running statistics (their gradient comes through batch norm written out: _StatisticsWritten)
    assert perturbed == forwards - 1 + 1 + 24 + 12


def test_a_forward_autograd_cannot_take_is_decided_by_perturbation_alone(tmp_path):
    """A tensor that needs a gradient cannot become numpy's: the gradient shows nothing, after two tries
    (parameters and buffers, then parameters alone)."""
    loaded = network(tmp_path, ungradable=True)
    with_gradient, forwards = decided(loaded, gradient=True)
    alone, perturbed = decided(loaded, gradient=False)
    assert with_gradient == alone and forwards == perturbed + 2


def test_each_problem_process_of_a_bench_gets_its_share_of_the_cores(tmp_path, monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(64)))
    assert (bench.cpu_threads(15), bench.cpu_threads(4), bench.cpu_threads(100)) == (4, 16, 1)
    started = []
    monkeypatch.setattr(bench.Searches, "start",
                        lambda self, command, **popen: started.append(popen["env"]) or object())
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    bench.launch(bench.BenchTask("p", "p"), tmp_path, "0", bench.Searches(), threads=4)
    monkeypatch.setenv("OMP_NUM_THREADS", "2")  # the user's own setting wins
    bench.launch(bench.BenchTask("q", "q"), tmp_path, "0", bench.Searches(), threads=4)
    assert [env["OMP_NUM_THREADS"] for env in started] == ["4", "2"]
    monkeypatch.setattr(bench, "visible_gpus", lambda: ["0", "1", "2", "3"])
    monkeypatch.delenv("OMP_NUM_THREADS")
    assert bench.LocalBackend(per_gpu=4).describe().endswith("; 4 CPU thread(s) each")


@pytest.fixture(autouse=True)
def _no_inherited_threads(monkeypatch):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)


BELOW_ROUNDING = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(8))
        self.bias = nn.Parameter(torch.ones(8))

    def forward(self, x):
        return self.bias + 1e-20 * self.weight * x  # x moves the output far below its rounding


def get_inputs():
    return [torch.randn(4, 8)]


def get_init_inputs():
    return []
'''


def test_a_dependence_below_the_outputs_rounding_counts(tmp_path):
    """level3/19_MobileNetV1 at its test sizes: its input changes no bit of the output, yet the output depends on it."""
    path = tmp_path / "below.py"
    path.write_text(BELOW_ROUNDING)
    loaded = load_problem(resolve_problem(str(path)))
    alone = find_dependence(loaded, ("x",), gradient=False)
    assert alone.inputs == (False,) and alone.ignored_parameters == ("weight",)
    counted = find_dependence(loaded, ("x",))
    assert counted.inputs == (True,) and counted.ignored_parameters == ()


@pytest.mark.parametrize("shape", [(5, 3), (2, 3, 4, 4)])
def test_batch_norm_written_out_is_torchs_own(shape):
    import torch
    import torch.nn.functional as F

    from fitness.problems.dependence import _StatisticsWritten

    x, mean, var, weight, bias = torch.randn(shape), torch.randn(3), torch.rand(3) + 0.5, torch.randn(3), torch.randn(3)
    expected = F.batch_norm(x, mean, var, weight, bias, False, 0.1, 1e-3)
    with _StatisticsWritten():
        positional = F.batch_norm(x, mean, var, weight, bias, False, 0.1, 1e-3)
        keywords = F.batch_norm(x, mean, var, weight=weight, bias=bias, eps=1e-3)
        plain = F.batch_norm(x, mean, var, eps=1e-3)
    assert torch.allclose(positional, expected, atol=1e-5) and torch.allclose(keywords, expected, atol=1e-5)
    assert torch.allclose(plain, F.batch_norm(x, mean, var, eps=1e-3), atol=1e-5)
