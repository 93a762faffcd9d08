"""Profiler feedback (fitness.profile=ncu): Nsight Compute's CSV parsed into a few metrics per kernel, the run under
ncu from a sandbox worker, the note when ncu is missing or cannot read the counters, and the metrics in the
planner's and debugger's prompts.

No GPU and no ncu here: the CSV is a hand-written fixture in ncu's documented format (its header says so), and
"ncu" is a stand-in script that writes it where the real one would; the lead runs the real one on a GPU.
"""
import stat
import sys
from pathlib import Path

import pytest

from conftest import TESTS, candidate, make_evaluator
from fitness.workers import ncu
from operators.llm.figures import profiler_text

FIXTURE = (TESTS / "fixtures" / "ncu" / "details_page.csv").read_text()


def fake_ncu(folder: Path, body: str) -> str:
    """An executable standing in for ncu, at `folder`/bin/ncu (folders open to all, as a CUDA toolkit's are):
    `body` is Python run with ncu's arguments in `args`."""
    (folder / "bin").mkdir(parents=True, exist_ok=True)
    for path in (folder, folder / "bin"):
        path.chmod(0o755)
    path = folder / "bin" / "ncu"
    path.write_text(f"#!{sys.executable}\nimport sys\nargs = sys.argv[1:]\n{body}\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return str(path)


WRITES_FIXTURE = (f"assert args[args.index('--profile-from-start') + 1] == 'off' and '--csv' in args\n"
                  f"assert args[-3:-1] == ['-m', 'fitness.workers.ncu_target'], args\n"
                  f"open(args[args.index('--log-file') + 1], 'w').write({FIXTURE!r})")


def test_the_details_page_csv_gives_a_few_metrics_per_kernel():
    launches = ncu.parse_csv(FIXTURE)
    assert [launch["name"] for launch in launches][:2] == ["layernorm_kernel", "layernorm_kernel"]
    kernels = ncu.merged(FIXTURE)
    assert len(kernels) == 2
    first = kernels[0]
    assert first["name"] == "layernorm_kernel" and first["launches"] == 2
    assert abs(first["time_s"] - (331616 + 329984) * 1e-9) < 1e-12  # thousands separators, nanoseconds
    assert (first["dram_pct"], first["sm_pct"], first["occupancy_pct"]) == (85.17, 30.25, 44.87)
    assert first["registers_per_thread"] == 40 and first["smem_bytes"] == 32 and first["grid_size"] == 4096
    assert first["top_stalls"] == [["long_scoreboard", 12.34], ["wait", 2.05], ["not_selected", 1.12]]
    assert kernels[1]["top_stalls"][0] == ["long_scoreboard", 20.1] and kernels[1]["grid_size"] == 65536
    text = profiler_text({"tool": "ncu", "kernels": kernels})
    assert ("- layernorm_kernel (2 launches, grid 4096, block 128): 662 us; DRAM 85% and SM 30% of peak throughput; "
            "achieved occupancy 45%; 40 registers/thread; 32 B shared memory/block; top stalls (cycles per issued "
            "instruction): long_scoreboard 12, wait 2, not_selected 1.1") in text
    assert "- void at::native::elementwise_kernel<128, 2, at::native::gpu_kernel_impl_nocas... (1 launch" in text
    assert ncu.merged("==PROF== nothing profiled\n") == [] and profiler_text({"note": "x"}) == ""


def test_a_missing_ncu_is_a_clear_note(monkeypatch, tmp_path, sandbox):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("CUDA_HOME", str(tmp_path))
    if not Path("/usr/local/cuda/bin/ncu").exists():
        assert ncu.find_ncu() is None
        assert ncu.unavailable(on_gpu=True) == ncu.MISSING_NOTE
        assert "Nsight Compute (ncu) was not found" in ncu.MISSING_NOTE and "fitness.profile=none" in ncu.MISSING_NOTE
    assert "CPU interpreter" in ncu.unavailable(on_gpu=False)
    found = fake_ncu(tmp_path, "")
    assert ncu.find_ncu() == found  # $CUDA_HOME/bin/ncu
    with make_evaluator(profile="ncu", sandbox=sandbox) as ev:  # on the CPU: a note, no profiling run
        assert ev.profile_kernel(candidate("good")) == {"tool": "ncu", "note": ncu.unavailable(False)}
        assert "profiler: no profiler metrics on the CPU interpreter" in ev.describe()
    with make_evaluator(sandbox=sandbox) as ev:
        assert ev.profile_kernel(candidate("good")) == {}  # profiling off (the default)


def test_the_candidate_runs_under_ncu_from_a_sandbox_worker(tmp_path, sandbox):
    writes = fake_ncu(tmp_path / "writes", WRITES_FIXTURE)
    denied = fake_ncu(tmp_path / "denied", "print('==ERROR== ERR_NVGPUCTRPERM - The user does not have permission "
                                           "to access NVIDIA GPU Performance Counters on the target device 0.')\n"
                                           "sys.exit(1)")
    with make_evaluator(profile="ncu", sandbox=sandbox) as ev:
        for tool, expected in ((writes, "kernels"), (denied, "note")):
            job = ev._job("profile", source=candidate("good"), ncu=tool, ncu_timeout_s=60,
                          readable=ncu.readable_paths(tool))
            outcome = ev._sandbox.run(job, 120)
            assert outcome.result is not None, outcome.log_tail
            record = outcome.result["profile"]
            assert expected in record and record["tool"] == "ncu" and record["wall_s"] > 0
    assert record["note"] == ncu.PERMISSION_NOTE


def test_profiler_metrics_reach_the_planner_and_the_debugger():
    from llm_fakes import PARENT, builder

    record = {"tool": "ncu", "kernels": ncu.merged(FIXTURE)}
    for role in ("planner", "debugger"):
        text = builder().build(role, PARENT if role == "planner" else None,
                               profiles={"parent 1.0": record, "best so far 2.3": record}).text
        assert "## Profiler metrics (Nsight Compute, one forward call on the target GPU" in text
        assert "### parent 1.0\n- layernorm_kernel (2 launches" in text and "### best so far 2.3" in text
    assert "## Profiler" not in builder(parts={"profiler": False}).build("planner", PARENT,
                                                                          profiles={"parent 1.0": record}).text
    assert "## Profiler" not in builder().build("planner", PARENT, profiles={"parent 1.0": {"note": "x"}}).text


def test_the_ncu_command_profiles_one_forward_call_only():
    command = ncu.ncu_command("/opt/ncu", "/usr/bin/python3", "job.json", "log.csv")
    assert command[:1] == ["/opt/ncu"] and command[-4:] == ["/usr/bin/python3", "-m", "fitness.workers.ncu_target", "job.json"]
    metrics = command[command.index("--metrics") + 1].split(",")
    assert "dram__throughput.avg.pct_of_peak_sustained_elapsed" in metrics and len(metrics) == len(ncu.METRICS)


def test_every_launch_is_totalled_and_a_forward_the_host_launches_is_said_so():
    from llm_fakes import PARENT_GENOME, ind
    from operators.base import OperatorContext
    from operators.llm.operators import _profiles

    kernels = ncu.merged(FIXTURE)
    total = ncu.total(kernels)
    assert total["launches"] == 3 == sum(k["launches"] for k in ncu.merged(FIXTURE))
    assert abs(total["time_s"] - sum(k["time_s"] for k in kernels)) < 1e-15
    many = [{"name": f"k{i}", "launches": 128, "time_s": 1e-4} for i in range(ncu.MAX_KERNELS + 2)]  # past the cut
    assert ncu.total(many) == {"launches": 128 * (ncu.MAX_KERNELS + 2),
                               "time_s": pytest.approx(1e-4 * (ncu.MAX_KERNELS + 2))}
    record = {"tool": "ncu", "kernels": ncu.merged(FIXTURE), "total": total}
    gpu = total["time_s"]
    plain = profiler_text(record).splitlines()[-1]
    assert plain == f"- all 3 launches together: {round(gpu * 1e6)} us on the GPU"
    busy = profiler_text({**record, "measured_s": 1.5 * gpu}).splitlines()[-1]
    assert busy == plain  # most of the forward is its kernels: nothing to add
    # level3/34's shape: the kernels ran a sixth of the measured forward (4.3 ms: 1.2 ms a launch here)
    host = profiler_text({**record, "measured_s": 6 * gpu}).splitlines()[-1]
    assert host.startswith(f"{plain}, 17% of the 4.3 ms the forward measured: the rest is the host launching them, "
                           f"about {5 * gpu / 3 * 1e6:.0f} us a launch. ")
    assert "Fewer launches (kernels fused, one persistent kernel over a loop) gain more here than faster" in host
    assert host.endswith("a launch through the compiled kernel (the seed's LaunchSites, where it has one) costs the "
                         "host under half of what Triton's kernel[grid](...) does")
    assert profiler_text({"tool": "ncu", "kernels": record["kernels"]}).count("\n") == 1  # an older record: no total
    # the operators give each profiled kernel's measured time beside its record
    parent = ind("1.0", PARENT_GENOME, 2e-3)
    context = OperatorContext(generation=2, archive=(parent,), profile_kernel=lambda source: record)
    assert _profiles(parent, context) == {"parent 1.0": {**record, "measured_s": 2e-3}}
