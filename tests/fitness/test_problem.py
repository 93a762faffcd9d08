"""Problem loading: bundled names, KernelBench files by path, size overrides, clear errors."""
import pytest

from conftest import PROBLEMS, SCALE_SHIFT
from fitness.problems.problem import (ProblemError, call_get_inputs, load_problem, resolve_problem, suite_manifest,
                             suite_names)


def test_bundled_suite_has_at_least_ten_problems_each_with_a_seed_and_test_sizes():
    manifest = suite_manifest()
    assert len(manifest) >= 10
    for name in manifest:
        spec = resolve_problem(name, size_preset="test")
        assert spec.sizes == manifest[name]["test_sizes"]
        assert "class ModelNew" in spec.seed_source()


def test_size_overrides_shrink_a_problem_loaded_from_a_path():
    problem = load_problem(resolve_problem(SCALE_SHIFT, sizes={"batch_size": 2, "dim": 7}))
    (x,) = call_get_inputs(problem)
    assert tuple(x.shape) == (2, 7)
    assert problem.spec.name == "scale_shift"


def test_test_preset_and_explicit_sizes_combine_explicit_last():
    spec = resolve_problem("row_softmax", sizes={"batch_size": 2}, size_preset="test")
    assert spec.sizes["batch_size"] == 2 and len(spec.sizes) >= 2


def test_unknown_size_constant_names_the_overridable_ones():
    with pytest.raises(ProblemError, match=r"'bogus' is not a module-level numeric constant.*\['batch_size', 'dim'\]"):
        load_problem(resolve_problem(SCALE_SHIFT, sizes={"bogus": 3}))


def test_missing_names_are_listed_with_the_file():
    path = PROBLEMS / "missing_get_inputs.py"
    with pytest.raises(ProblemError, match=r"missing_get_inputs\.py: .*does not define get_inputs"):
        load_problem(resolve_problem(str(path)))


def test_failing_get_inputs_names_the_file_and_the_error():
    problem = load_problem(resolve_problem(str(PROBLEMS / "failing_get_inputs.py")))
    with pytest.raises(ProblemError, match=r"failing_get_inputs\.py: get_inputs\(\) failed: NameError"):
        call_get_inputs(problem)


def test_unknown_problem_lists_the_bundled_names():
    with pytest.raises(ProblemError, match="neither a bundled problem") as err:
        resolve_problem("no_such_problem")
    assert suite_names()[0] in str(err.value)


SOFTMAX = ("import torch\nimport torch.nn as nn\n\n"
           "class Model(nn.Module):\n    def forward(self, x):\n        return torch.softmax(x, dim=1)\n\n"
           "batch_size = 4096\ndim = 393216\n\n"
           "def get_inputs():\n    return [torch.rand(batch_size, dim)]\n\n"
           "def get_init_inputs():\n    return []\n")
CONV = ("import torch\nimport torch.nn as nn\n\n"
        "class Model(nn.Module):\n    def __init__(self, c_in, c_out, k, groups):\n        super().__init__()\n"
        "        self.conv = nn.Conv2d(c_in, c_out, k, padding=1, groups=groups)\n\n"
        "    def forward(self, x):\n        return self.conv(x)\n\n"
        "batch_size = 16\nin_channels = 64\nout_channels = 128\nkernel_size = 3\nheight = 256\nwidth = 512\n"
        "groups = 32\n\n"
        "def get_inputs():\n    return [torch.randn(batch_size, in_channels, height, width)]\n\n"
        "def get_init_inputs():\n    return [in_channels, out_channels, kernel_size, groups]\n")


@pytest.mark.parametrize("source", [SOFTMAX, CONV])
def test_a_file_at_test_size_is_shrunk_by_the_stated_rule(tmp_path, source):
    """KernelBench sizes on the interpreter time out: the test preset (what `auto` means on the CPU) halves the
    largest size constant until the largest tensor holds at most MAX_ELEMENTS; small constants stay."""
    from fitness.problems.sizes import MAX_ELEMENTS, largest_tensor

    path = tmp_path / "big.py"
    path.write_text(source)
    spec = resolve_problem(str(path), size_preset="test")
    problem = load_problem(spec)
    assert 0 < largest_tensor(problem) <= MAX_ELEMENTS
    assert "kernel_size" not in spec.sizes and "shrunk for the interpreter" in spec.size_note
    assert all(v >= 8 for v in spec.sizes.values())
    assert resolve_problem(str(path), size_preset="test") == spec  # a rule, not a guess: the same every time


def test_sizes_the_user_sets_are_kept_and_the_rest_shrinks(tmp_path):
    path = tmp_path / "softmax.py"
    path.write_text(SOFTMAX)
    spec = resolve_problem(str(path), sizes={"batch_size": 8}, size_preset="test")
    assert spec.sizes["batch_size"] == 8 and 8 * spec.sizes["dim"] <= 16384
    assert "set by you: batch_size=8" in spec.size_note
    assert resolve_problem(str(path), size_preset="full").sizes == {}  # full: the file's own sizes


def test_kernelbench_file_with_module_level_sizes_loads_unchanged(tmp_path):
    # The shape of a KernelBench level-1 file, verbatim conventions: globals read inside get_inputs.
    path = tmp_path / "19_ReLU.py"
    path.write_text(
        "import torch\nimport torch.nn as nn\n\n"
        "class Model(nn.Module):\n    def __init__(self):\n        super(Model, self).__init__()\n\n"
        "    def forward(self, x: torch.Tensor) -> torch.Tensor:\n        return torch.relu(x)\n\n"
        "batch_size = 16\ndim = 16384\n\n"
        "def get_inputs():\n    x = torch.randn(batch_size, dim)\n    return [x]\n\n"
        "def get_init_inputs():\n    return []  # No special initialization inputs needed\n")
    problem = load_problem(resolve_problem(str(path), sizes={"dim": 5}))
    assert tuple(call_get_inputs(problem)[0].shape) == (16, 5)


MLP = ("import torch\nimport torch.nn as nn\n\n"  # KernelBench's level3/1_MLP: its hidden widths are a list
       "class Model(nn.Module):\n    def __init__(self, input_size, layer_sizes, output_size):\n"
       "        super().__init__()\n        layers, current = [], input_size\n"
       "        for size in layer_sizes:\n            layers += [nn.Linear(current, size), nn.ReLU()]\n"
       "            current = size\n        layers.append(nn.Linear(current, output_size))\n"
       "        self.network = nn.Sequential(*layers)\n\n"
       "    def forward(self, x):\n        return self.network(x)\n\n"
       "batch_size = 128\ninput_size = 16384\nlayer_sizes = [16384, 16384]\noutput_size = 8192\n\n"
       "def get_inputs():\n    return [torch.rand(batch_size, input_size)]\n\n"
       "def get_init_inputs():\n    return [input_size, layer_sizes, output_size]\n")
BIAS = ("import torch\nimport torch.nn as nn\n\n"  # level 2's shape: a tuple that repeats another size constant
        "class Model(nn.Module):\n    def __init__(self, c_in, c_out, k, bias_shape):\n        super().__init__()\n"
        "        self.conv = nn.Conv2d(c_in, c_out, k)\n        self.bias = nn.Parameter(torch.randn(bias_shape))\n\n"
        "    def forward(self, x):\n        return self.conv(x) + self.bias\n\n"
        "batch_size = 64\nin_channels = 32\nout_channels = 128\nheight = width = 64\nkernel_size = 3\n"
        "bias_shape = (out_channels, 1, 1)\n\n"
        "def get_inputs():\n    return [torch.randn(batch_size, in_channels, height, width)]\n\n"
        "def get_init_inputs():\n    return [in_channels, out_channels, kernel_size, bias_shape]\n")


def test_a_list_of_sizes_shrinks_with_the_rest(tmp_path):
    """level3/1_MLP's hidden widths are a list constant: the rule halves its elements too, so its 16384 x 16384
    weights fit the interpreter's bound (they kept their full size before: only integer constants shrank)."""
    from fitness.problems.sizes import MAX_ELEMENTS, largest_tensor

    path = tmp_path / "1_MLP.py"
    path.write_text(MLP)
    spec = resolve_problem(str(path), size_preset="test")
    problem = load_problem(spec)
    assert 0 < largest_tensor(problem) <= MAX_ELEMENTS
    assert isinstance(spec.sizes["layer_sizes"], list) and all(8 <= v < 16384 for v in spec.sizes["layer_sizes"])
    assert problem.module.layer_sizes == spec.sizes["layer_sizes"]
    weights = [p.shape for p in problem.Model(*problem.get_init_inputs()).parameters() if p.dim() == 2]
    assert [w[0] for w in weights[:2]] == spec.sizes["layer_sizes"]  # the model is built at the shrunk widths
    assert "layer_sizes=[16384, 16384]" in spec.size_note  # the file's own value, said
    assert resolve_problem(str(path), size_preset="test") == spec


def test_a_tuple_that_repeats_a_size_shrinks_with_it_and_lists_are_overridable(tmp_path):
    """`bias_shape = (out_channels, 1, 1)` must follow out_channels: neither halves alone on the meta device, so
    they halve together; a user sets a list constant with a list, and a number for it is refused, naming both."""
    from fitness.problems.sizes import MAX_ELEMENTS, largest_tensor

    path = tmp_path / "conv_bias.py"
    path.write_text(BIAS)
    spec = resolve_problem(str(path), size_preset="test")
    assert spec.sizes["bias_shape"] == (spec.sizes["out_channels"], 1, 1) and spec.sizes["out_channels"] < 128
    assert 0 < largest_tensor(load_problem(spec)) <= MAX_ELEMENTS
    mlp = tmp_path / "mlp.py"
    mlp.write_text(MLP)
    fixed = resolve_problem(str(mlp), sizes={"layer_sizes": [24, 40]}, size_preset="test")
    assert fixed.sizes["layer_sizes"] == [24, 40] and load_problem(fixed).module.layer_sizes == [24, 40]
    with pytest.raises(ProblemError, match=r"layer_sizes=8: the file's layer_sizes is \[16384, 16384\]; give a list"):
        load_problem(resolve_problem(str(mlp), sizes={"layer_sizes": 8}))


CROSS_ENTROPY = ("import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n"
                 "    def forward(self, predictions, targets):\n"
                 "        return torch.nn.functional.cross_entropy(predictions, targets)\n\n"
                 "batch_size = 32768\nnum_classes = 4096\ninput_shape = (num_classes,)\n\n"
                 "def get_inputs():\n"
                 "    return [torch.rand(batch_size, *input_shape), torch.randint(0, num_classes, (batch_size,))]\n\n"
                 "def get_init_inputs():\n    return []\n")


def test_a_size_the_file_writes_as_another_constant_shrinks_with_it(tmp_path):
    """level1/95: `input_shape = (num_classes,)` halved apart from num_classes (both build on the meta device, which
    reads no target) made targets fall outside the classes on the interpreter (issue 63)."""
    path = tmp_path / "95_CrossEntropyLoss.py"
    path.write_text(CROSS_ENTROPY)
    spec = resolve_problem(str(path), size_preset="test")
    assert spec.sizes["input_shape"] == (spec.sizes["num_classes"],) and spec.sizes["num_classes"] < 4096


def test_other_sizes_move_the_elements_of_a_list_of_sizes_too(tmp_path):
    """The check at other sizes (is the best kernel baked at the test sizes?) changes level3/1_MLP's hidden widths
    as it changes its integers: a kernel with the widths baked in fails there."""
    from fitness.problems.sizes import other_sizes, other_value

    path = tmp_path / "1_MLP.py"
    path.write_text(MLP)
    spec = resolve_problem(str(path), size_preset="test")
    other = other_sizes(load_problem(spec))
    assert other.changed["layer_sizes"] == [other_value(v) for v in spec.sizes["layer_sizes"]]
    assert other.changed["input_size"] == other_value(spec.sizes["input_size"]) and other.unchanged == []


LSTM = ("import torch\nimport torch.nn as nn\n\n"  # level3/38_LSTMBidirectional's form
        "class Model(nn.Module):\n    def __init__(self, input_size, hidden_size, num_layers):\n"
        "        super().__init__()\n"
        "        self.lstm = nn.LSTM(input_size, hidden_size, num_layers, batch_first=True, bidirectional=True)\n\n"
        "    def forward(self, x):\n        out, _ = self.lstm(x)\n        return out\n\n"
        "batch_size = 10\nsequence_length = 512\ninput_size = 128\nhidden_size = 256\nnum_layers = 6\n\n"
        "def get_inputs():\n    return [torch.rand(batch_size, sequence_length, input_size)]\n\n"
        "def get_init_inputs():\n    return [input_size, hidden_size, num_layers]\n")


@pytest.mark.parametrize("layer, batch_first, bidirectional, proj_size, batched, with_state", [
    ("LSTM", True, True, 0, True, False), ("LSTM", False, False, 3, True, True), ("LSTM", False, True, 0, False, True),
    ("GRU", True, False, 0, True, True), ("GRU", False, True, 0, False, False), ("RNN", True, True, 0, True, True)])
def test_a_recurrent_layer_on_the_meta_device_answers_with_the_shapes_its_forward_returns(
        layer, batch_first, bidirectional, proj_size, batched, with_state):
    import torch

    from fitness.problems.sizes import recurrent_shapes

    def shapes(result):
        output, state = result
        return [output.shape] + [s.shape for s in (state if isinstance(state, tuple) else (state,))]

    with torch.device("meta"):
        rnn = getattr(torch.nn, layer)(5, 6, num_layers=2, batch_first=batch_first, bidirectional=bidirectional,
                                       **({"proj_size": proj_size} if proj_size else {}))
        x = torch.randn(4, 7, 5) if batched else torch.randn(7, 5)
        expected = shapes(rnn(x))
        state = None
        if with_state:
            (h, *c) = (torch.empty(s) for s in expected[1:])
            state = (h, *c) if c else h
        assert shapes(recurrent_shapes(rnn, x, state)) == expected == shapes(rnn(x, state))
        with pytest.raises(RuntimeError):  # a size the layer was not built for fails as its forward does
            recurrent_shapes(rnn, torch.randn(4, 7, 3))
        with pytest.raises(RuntimeError):
            recurrent_shapes(rnn, x, torch.empty(1, 1, 1) if layer != "LSTM" else (torch.empty(1, 1, 1), None))


def test_the_shrink_rule_runs_no_recurrent_layer_step_by_step(tmp_path, monkeypatch):
    """level3/38 on 4 x H200: its evaluator took 196.5 s to start, the shrink rule's forwards of a 6-layer LSTM of
    512 steps on the meta device (``experiments/results/kernelbench_part8/``)."""
    import torch

    from fitness.problems.sizes import largest_tensor

    path = tmp_path / "lstm.py"
    path.write_text(LSTM)
    monkeypatch.setattr(torch.nn.LSTM, "forward", lambda *args: pytest.fail("the LSTM ran on the meta device"))
    problem = load_problem(resolve_problem(str(path), size_preset="full"))
    assert largest_tensor(problem) == 10 * 512 * 2 * 256  # the output: every step, both directions
    spec = resolve_problem(str(path), size_preset="test")
    assert "shrunk for the interpreter" in spec.size_note and 0 < largest_tensor(load_problem(spec)) <= 16384


ITEM = ("import torch\nimport torch.nn as nn\n\n"  # level3/29-30's (the Swins') constructor reads tensor values
        "class Model(nn.Module):\n    def __init__(self, dim):\n        super().__init__()\n"
        "        rates = [x.item() for x in torch.linspace(0, 0.1, 3)]\n"
        "        self.layers = nn.ModuleList(nn.Linear(dim, dim) for _ in rates)\n\n"
        "    def forward(self, x):\n        for layer in self.layers:\n            x = layer(x)\n        return x\n\n"
        "batch_size = 64\ndim = 1024\n\n"
        "def get_inputs():\n    return [torch.rand(batch_size, dim)]\n\n"
        "def get_init_inputs():\n    return [dim]\n")


def test_a_constructor_reading_tensor_values_is_built_on_the_cpu_and_its_problem_shrinks_and_has_a_cost(tmp_path):
    from fitness.problems.sizes import MAX_ELEMENTS, largest_tensor
    from fitness.problems.speed_of_light import measure_cost

    path = tmp_path / "item.py"
    path.write_text(ITEM)
    full = load_problem(resolve_problem(str(path), size_preset="full"))
    assert largest_tensor(full) == 1024 * 1024 and measure_cost(full).flops == 3 * 2 * 64 * 1024 * 1024
    spec = resolve_problem(str(path), size_preset="test")
    assert "shrunk for the interpreter" in spec.size_note and largest_tensor(load_problem(spec)) <= MAX_ELEMENTS


def test_a_problem_that_cannot_shrink_says_it_is_over_the_interpreters_bound(tmp_path):
    path = tmp_path / "cube.py"  # every size constant below MIN_SHRINKABLE, its input of 12**4 elements
    path.write_text("import torch\nimport torch.nn as nn\n\nclass Model(nn.Module):\n"
                    "    def forward(self, x):\n        return x * 2\n\nside = 12\n\n"
                    "def get_inputs():\n    return [torch.rand(side, side, side, side)]\n\n"
                    "def get_init_inputs():\n    return []\n")
    note = resolve_problem(str(path), size_preset="test").size_note
    assert "its largest tensor, 20,736 elements, is over the interpreter's bound of 16,384" in note
    assert "its other sizes are not module-level constants or cannot shrink" in note
