"""What the convolution-fusion tests share (tests/seeds/test_conv_epilogues.py, test_conv_reductions.py): a capture
made on the CPU and its problem, its seed converted unfused and fused, the converter's reasons for the kernels it
left apart, the calls of a seed's forward, and a seed run against its reference."""
from __future__ import annotations

import ast
import importlib.util
import json
import logging
from pathlib import Path

import torch

from fitness.problems.problem import call_get_init_inputs, call_get_inputs, load_problem, resolve_problem
from kernelevo.seeds.inductor.convert import convert

REPO = Path(__file__).resolve().parents[1]
CPU_FIXTURES = REPO / "tests" / "fixtures" / "inductor_cpu"  # made by experiments/inductor_fixtures.py --device cpu
LOGGER = "kernelevo.seeds.inductor.epilogues"  # where the converter says why a kernel stays apart


def cpu_fixture(name: str) -> tuple[dict, str]:
    """(the capture tests/fixtures/inductor_cpu/NAME.json holds, its problem's path)."""
    captured = json.loads((CPU_FIXTURES / f"{name}.json").read_text())
    return captured, str(REPO / captured["fixture"]["problem"])


def seed_pair(captured: dict, problem: str, interpreter: bool = True) -> tuple[str, str]:
    """(the seed unfused, fused), policy triton's, for Triton's interpreter unless `interpreter` is False."""
    text = Path(problem).read_text()
    return tuple(convert(captured, text, Path(problem).stem, interpreter=interpreter, triton_convolutions=True,
                         epilogues=fused) for fused in (False, True))


def refused(captured: dict, problem: str, caplog) -> list[str]:
    """The reasons the converter gives for each kernel it left apart; asserts the seed is the unfused one."""
    with caplog.at_level(logging.INFO, logger=LOGGER):
        plain, fused = seed_pair(captured, problem)
    assert fused == plain
    return [r.getMessage() for r in caplog.records if r.name == LOGGER]


def forward_calls(source: str) -> list[str]:
    """Every call in the seed's forward, as source text."""
    forward = next(n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.FunctionDef) and n.name == "forward")
    return [ast.unparse(n) for n in ast.walk(forward) if isinstance(n, ast.Call)]


def run_seed(source: str, problem: str, tmp_path: Path, name: str) -> tuple[torch.Tensor, torch.Tensor, int]:
    """(the seed's output, the reference's, the seed's kernel launches in one forward), the seed written to
    tmp_path/NAME.py and given the reference's weights."""
    path = tmp_path / f"{name}.py"
    path.write_text(source)
    loader = importlib.util.spec_from_file_location(name, path)
    seed = importlib.util.module_from_spec(loader)
    loader.loader.exec_module(seed)
    launched = []
    for kernel in [v for v in vars(seed).values() if hasattr(v, "run") and hasattr(v, "fn")]:
        kernel.run = (lambda run: lambda *a, **k: launched.append(1) or run(*a, **k))(kernel.run)
    reference_problem = load_problem(resolve_problem(problem))
    torch.manual_seed(0)
    reference = reference_problem.Model(*call_get_init_inputs(reference_problem))
    model = seed.ModelNew(*call_get_init_inputs(reference_problem))
    model.load_state_dict(reference.state_dict())
    inputs = call_get_inputs(reference_problem)
    with torch.no_grad():
        return model(*inputs), reference(*inputs), len(launched)
