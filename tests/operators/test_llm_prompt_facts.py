"""Issue 42, point 4: the prompts state the rules and shapes exactly -- the torch calls `forward` may make (the
evaluator's own list, fitness.judge.guards.DATA_MOVEMENT_OPS), every input's full and test shape, and what the tuner
does on this device -- checked on the prompts the team sends to the scripted server."""
from llm_fakes import PARENT_GENOME, ind, live_team, mutate
from llm_fakes import server  # noqa: F401 (the fixture)
from fitness.judge.guards import DATA_MOVEMENT_OPS
from fitness.problems.problem import resolve_problem
from fitness.problems.target import target_for
from hardware_profiles import load_profile
from operators.llm.context import ContextBuilder, ContextSettings
from operators.llm.figures import judged_inputs, tuning_text

MSE_SOURCE = '''import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, predictions, targets):
        return torch.mean((predictions - targets) ** 2)

batch_size = 32768
input_shape = (32768,)
dim = 1

def get_inputs():
    return [torch.rand(batch_size, *input_shape), torch.rand(batch_size, *input_shape)]

def get_init_inputs():
    return []
'''  # KernelBench level1/94_MSELoss.py: `input_shape` a tuple of sizes, `dim` an unused one


def test_every_input_is_told_at_its_full_and_its_test_shape(tmp_path):
    path = tmp_path / "94_MSELoss.py"
    path.write_text(MSE_SOURCE)
    spec = resolve_problem(str(path), size_preset="test")
    target = target_for(spec, "cpu", load_profile("h100_sxm"), False)
    text = ContextBuilder(ContextSettings(), target, MSE_SOURCE, judged_inputs(spec)).build("coder").text
    assert "Inputs at full size predictions: float32[32768, 32768], targets: float32[32768, 32768]" in text
    # input_shape, a tuple of sizes, shrinks with batch_size since issue 43 (fitness.problems.sizes)
    assert "at the test sizes the interpreter judges: predictions: float32[128, 128], targets: float32[128, 128]" \
        in text


def test_the_system_prompt_lists_the_allowed_torch_calls_and_the_tuning_here(server, tmp_path):  # noqa: F811
    team = live_team(server, tmp_path)
    parent = ind("1.0", PARENT_GENOME, 0.02, parents=("0.0",))
    mutate(team, parent, [ind("0.0", PARENT_GENOME, 0.03, "seed"), parent])
    system = server.requests[0][2]["messages"][0]["content"]
    public = {op for op in DATA_MOVEMENT_OPS if not op.startswith(("_", "sym_"))}
    assert all(f"`{op}`" in system for op in public) and "`zeros`" in system and "`full`" in system
    assert "`_unsafe_view`" not in system and "zero- and value-filled allocations included" in system
    assert "no kernel an LLM writes is tuned: it is judged once, with its constants as written (1 trial)" in system
    assert "an optimiser tunes them afterwards" not in system
    on_gpu = target_for(resolve_problem("row_softmax"), "cuda", load_profile("h100_sxm"), False)
    assert "tunes the constants declared in `TUNABLE` on this GPU (6 trials per kernel" in tuning_text(on_gpu, 6)
