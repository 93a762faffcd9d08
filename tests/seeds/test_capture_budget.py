"""A slow Inductor variant never loses the problem (issue 43: on 4 x H200 four problems hit the bench's 900 s inside
torch.compile's capture and ended with no kernel at all, the default seed captured minutes before lost with the
variant still compiling). The capture process writes its output after each capture, the parent keeps and caches each
as it arrives, the variants after the default share ``inductor.variants_budget_s`` and a crash keeps what finished
(kernelevo/seeds/inductor/process.py). On the CPU interpreter, with the real process and the real setting made tiny."""
import os
import re
import sys

import pytest

from kernelevo.core.errors import KernelevoError
from fitness.problems.problem import resolve_problem
from kernelevo.plans import run_plan
from kernelevo.validate import ConfigError, Validator
from kernelevo.seeds import inductor as seeds
from kernelevo.seeds.inductor.cache import CACHED, failed_before
from kernelevo.seeds.inductor.settings import CaptureSettings

VARIANTS = {"nd_tiling": {"triton": {"prefer_nd_tiling": True}}, "looped": {"triton": {"persistent_reductions": False}}}
MORE = {**VARIANTS, "cooperative": {"triton": {"cooperative_reductions": True}}}
# the capture process dies right after its second write (the default's, then the first variant's), as a segmentation
# fault in Inductor would end it: a Python start-up module of the test's own, not a hook of kernelevo's
CRASH_AFTER_SECOND_WRITE = """import os, signal
_replace, _writes = os.replace, []
def replace(src, dst, *args, **kwargs):
    _replace(src, dst, *args, **kwargs)
    _writes.extend([dst] if str(dst).endswith("captured.json") else [])
    if len(_writes) == 2:
        os.kill(os.getpid(), signal.SIGSEGV)
os.replace = replace
"""


def test_a_crash_keeps_the_captures_before_it_and_variants_past_their_budget_are_stopped(tmp_path, monkeypatch,
                                                                                         capsys):
    spec = resolve_problem("rmsnorm", size_preset="test")
    cache, crash = tmp_path / "cache", tmp_path / "crash"
    get = lambda **kw: seeds.inductor_seeds(spec, "cpu", "cpu_interpreter", cache, dynamic=False, **kw)  # noqa: E731
    entry = lambda name: seeds.entry_file(cache, spec, seeds.cache_key(  # noqa: E731
        spec, "cpu", "cpu_interpreter", options=MORE.get(name)))
    crash.mkdir()
    (crash / "sitecustomize.py").write_text(CRASH_AFTER_SECOND_WRITE)
    with monkeypatch.context() as patched:
        patched.setenv("PYTHONPATH", os.pathsep.join([str(crash), os.environ.get("PYTHONPATH", "")]))
        first = get(variants=VARIANTS)  # the default and nd_tiling captured, then the process dies
    said = capsys.readouterr()
    assert list(first) == ["inductor"] and first.cache["default"] != CACHED  # nd_tiling wrote the default's kernels
    assert re.search(r"\[kernelevo\] capture of rmsnorm: default [\d.]+ m?s\n", said.out), said.out  # each one's time
    assert re.search(r"\[kernelevo\] capture of rmsnorm: nd_tiling [\d.]+ m?s\n", said.out), said.out
    assert "capture of rmsnorm: the process ended (exit code -11) before looped; the captures before are kept" in \
        said.err
    assert "no seed from Inductor's variant 'looped': looped not finished: the capture process ended" in said.out
    assert entry("default").is_file() and entry("nd_tiling").is_file()  # both kept and cached
    assert "the capture process ended (exit code -11) before it" in failed_before(entry("looped"))  # noted only

    second = get(variants=MORE, settings=CaptureSettings(variants_budget_s=0.01))  # the real setting, made tiny
    said = capsys.readouterr()
    assert second == first and second.cache["default"] == second.cache["nd_tiling"] == CACHED
    assert "capture of rmsnorm: looped stopped at the 0.01 s budget of Inductor's variants; cooperative skipped: " \
           "raise inductor.variants_budget_s to capture them" in said.out
    for name in ("looped", "cooperative"):  # noted, not cached: the next run tries them again, saying why
        assert not entry(name).is_file() and "not finished within the 0.01 s budget" in failed_before(entry(name))
    monkeypatch.setattr(seeds, "capture_variants", lambda *a, **k: pytest.fail("captured again: not cached"))
    assert get(variants={"nd_tiling": VARIANTS["nd_tiling"]}).cache == {"default": CACHED, "nd_tiling": CACHED}


SLOW_VARIANT = """import json, os, sys, time
def write(captured):
    open(sys.argv[1] + ".tmp", "w").write(json.dumps(captured))
    os.replace(sys.argv[1] + ".tmp", sys.argv[1])
time.sleep(float(sys.argv[3]))  # the default
write({"default": {"code": "...", "finished_at": time.time()}})
time.sleep(float(sys.argv[2]))  # the first variant
write({"default": {"code": "..."}, "slow": {"code": "...", "finished_at": time.time()}})
"""


def test_the_variants_budget_starts_when_the_default_is_written_and_stops_the_process_at_its_end(tmp_path):
    """The watch of the capture process (kernelevo/seeds/inductor/process.py) with a stand-in for it: the default's own
    limit
    runs until the default is written, then the variants' budget; a variant that finishes within it is taken."""
    from kernelevo.seeds.inductor.process import watch

    out, names, arrived = tmp_path / "captured.json", ["default", "slow", "after"], []
    command = lambda variant_s, default_s=0.1: [sys.executable, "-c", SLOW_VARIANT, str(out),  # noqa: E731
                                                str(variant_s), str(default_s)]
    stopped = watch(command(30), out, names, 5.0, 0.5, lambda name, got: arrived.append(name))
    # stopped at the budget's end (killed: no return code), not at the variant's (which would have written it)
    assert list(stopped.captured) == arrived == ["default"] and stopped.returncode is None
    assert stopped.stopped_after_s == 0.5 and "finished_at" not in stopped.captured["default"]
    out.unlink()
    ended = watch(command(0.01), out, names, 5.0, 2.0)  # within the budget: taken; the process ends without "after"
    assert list(ended.captured) == ["default", "slow"] and ended.returncode == 0
    out.unlink()
    own_limit = watch(command(0, 5), out, names, 0.05, 10.0)  # the default's own limit: nothing taken after it
    assert own_limit.captured == {} and own_limit.returncode is None and own_limit.stopped_after_s == 0.05


def test_the_variants_budget_is_a_setting_of_run_and_seed_checked_on_the_command_line():
    cfg, _ = Validator("run", "config").check(["inductor.variants_budget_s=30"])
    assert run_plan(cfg).capture == CaptureSettings(variants_budget_s=30)
    assert run_plan(Validator("run", "config").check([])[0]).capture == CaptureSettings()
    cfg, _ = Validator("seed", "seed").check(["inductor.variants_budget_s=45", "problem=rmsnorm"])
    assert cfg.inductor.variants_budget_s == 45
    with pytest.raises(ConfigError, match="did you mean inductor.variants_budget_s"):
        Validator("run", "config").check(["inductor.variants_budget=30"])
    with pytest.raises(KernelevoError,
                       match=r"inductor.variants_budget_s=0: the seconds Inductor's variants share must"):
        CaptureSettings(variants_budget_s=0)
