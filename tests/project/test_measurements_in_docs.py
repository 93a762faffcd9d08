"""Issue 67: docstrings and comments state contracts; a figure measured on a machine lives in docs/measurements.md,
under the code it concerns, with where it was measured. A product module that says what was measured on which GPU
("on 4 x H200 ... 1,402 s") keeps a fact of one machine and one moment in the code, where nothing measures it again."""
import re

from conftest import REPO

PRODUCT = ("hardware_profiles", "fitness", "operators", "evo", "conf", "kernelevo")
ON_A_GPU = re.compile(r"\bon (?:an? |one |\d+ x )(?:H100|H200|A100|L40S|RTX ?4090)\b")


def test_the_pattern_finds_a_figure_said_of_a_gpu_and_not_a_gpus_name():
    assert ON_A_GPU.search("a looped row reduction built in 2.4 s on an H100")
    assert ON_A_GPU.search("15 problems on 4 x H200 kept an evaluator from starting for 1,402 s")
    assert not ON_A_GPU.search('The GPU\'s name as CUDA gives it ("NVIDIA H100 80GB HBM3")')


def test_no_product_module_says_what_was_measured_on_which_gpu():
    modules = [path for package in PRODUCT for path in sorted((REPO / package).rglob("*.py"))]
    found = [f"{path.relative_to(REPO)}:{number}" for path in modules
             for number, line in enumerate(path.read_text().splitlines(), 1) if ON_A_GPU.search(line)]
    assert found == [], "move the figures to docs/measurements.md, under the code they concern, and point there"
