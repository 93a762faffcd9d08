"""What other processes on a machine do is no verdict on a kernel. A CUDA out-of-memory error they caused
(fitness.judge.candidate.crowded_out): on 4 x H100 with three problems per GPU, honest kernels of level1/76 and
level1/87 were judged runtime errors because the GPU's memory was held by the other problems' processes. A host slow
to wake under load (fitness.judge.pipeline.time_candidate): level1/44's seed was rejected for work on another
stream it does not do."""
from types import SimpleNamespace

import pytest

from fitness.judge.candidate import crowded_out
from fitness.judge import pipeline
from fitness.judge.checks import Verdict
from fitness.measure.timing import TimingStats
from fitness.workers import worker

LEVEL1_76 = ("OutOfMemoryError: CUDA out of memory. Tried to allocate 10.67 GiB. GPU 0 has a total capacity of 79.18 "
             "GiB of which 3.37 GiB is free. Including non-PyTorch memory, this process has 61.96 GiB memory in use. "
             "Of the allocated memory 57.34 GiB is allocated by PyTorch")
LEVEL1_87 = ("evaluation failed outside the candidate: ProblemError: 87_conv_pointwise_2D.py: get_inputs() failed: "
             "OutOfMemoryError: CUDA out of memory. Tried to allocate 4.00 GiB. GPU 0 has a total capacity of 79.18 "
             "GiB of which 208.56 MiB is free. Including non-PyTorch memory, this process has 614.00 MiB memory in "
             "use.")
ITS_OWN = ("OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 GiB. GPU 0 has a total capacity of 79.18 "
           "GiB of which 9.00 GiB is free. Including non-PyTorch memory, this process has 70.00 GiB memory in use.")


def test_an_out_of_memory_error_others_caused_is_said_and_one_the_job_caused_is_not():
    assert crowded_out(LEVEL1_76) == ("the GPU's memory was held by other processes (this job held 62.0 GiB of 79.2 "
                                      "GiB and asked for 10.7 GiB more): no verdict on the kernel")
    assert crowded_out(LEVEL1_87).startswith("the GPU's memory was held by other processes (this job held 0.6 GiB")
    assert crowded_out(ITS_OWN) == ""  # 90 GiB asked and held: the kernel's own, a runtime error as before
    assert crowded_out("RuntimeError: CUDA error: an illegal memory access was encountered") == ""


def test_a_job_crowded_out_is_an_infrastructure_failure_and_others_are_left_as_they_were(monkeypatch):
    for reason, infrastructure in ((LEVEL1_76, True), (ITS_OWN, False)):
        monkeypatch.setattr(worker, "_run_job", lambda job: {"status": "runtime_error", "reason": reason})
        result = worker.run_job(None)
        assert result.get("infrastructure", False) is infrastructure and result["reason"].endswith(reason)
    monkeypatch.setattr(worker, "_run_job", lambda job: {"status": "incorrect", "reason": LEVEL1_76})
    assert "infrastructure" not in worker.run_job(None)  # only a runtime error can be the GPU's crowding


def stats(stream_us: float, device_us: float) -> TimingStats:
    return TimingStats.from_samples("cuda-events", [stream_us * 1e-6], [stream_us * 1e-6], [device_us * 1e-6])


@pytest.mark.parametrize("second, rejected", [((2526, 2530), False), ((2526, 5011), True)])
def test_work_on_another_stream_is_rejected_only_when_a_second_timing_shows_it_too(monkeypatch, second, rejected):
    """level1/44's Inductor seed on 4 x H100, 12 searches on 64 cores: the device busy 5011 us, the timed stream
    2526 us, once: a host slow to wake from its synchronize looks like work on another stream."""
    timings = iter([stats(2526, 5011), stats(*second)])
    monkeypatch.setattr(pipeline.timing, "make_timer", lambda *args: SimpleNamespace(
        measure=lambda timed, feed: next(timings)))
    job = SimpleNamespace(device="cuda:0", l2_bytes=0, settings=SimpleNamespace(timing=None))
    feed = SimpleNamespace(draw_s=0.0, check_s=0.0)
    if rejected:
        with pytest.raises(Verdict, match="the device was busy 5011 us per call but the timed stream only 2526 us"):
            pipeline.time_candidate(None, feed, job)
    else:
        assert pipeline.time_candidate(None, feed, job)["stream_median_s"] == pytest.approx(2526e-6)


def test_torch_compiles_capture_on_a_gpu_is_told_its_gpus_lock_and_leaves_timers_the_gpu_while_it_compiles(
        tmp_path, monkeypatch):
    """The capture process holds its GPU's lock itself, only while it runs the model or Inductor benchmarks
    (``fitness.common.gpu_lock.inductor_benchmarks_shared``: tests/fitness/test_gpu_lock.py): the parent holds none
    while the process runs, so a timing of another run on that GPU goes ahead while it compiles (held for a whole
    capture, it kept the neighbour waiting for up to 15 minutes)."""
    import fcntl
    import json
    import os

    from fitness.common.gpu_lock import lock_path
    from fitness.problems.problem import resolve_problem
    from kernelevo.seeds import inductor
    from kernelevo.seeds.inductor import process

    monkeypatch.setattr(inductor, "LOCK_DIR", tmp_path)
    seen = []

    def capture(command, **kwargs):  # the capture process, faked: its lock argument; can a timer take the GPU now?
        path = lock_path(tmp_path, command[5])  # None on the CPU: no lock
        told = [arg for arg in command if arg.startswith("gpu_lock=")]
        fd = os.open(path, os.O_RDWR | os.O_CREAT) if path else None
        try:
            if fd is not None:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            seen.append((told, "timer goes ahead"))
        except BlockingIOError:
            seen.append((told, "timer waits"))
        finally:
            if fd is not None:
                os.close(fd)
        open(command[4], "w").write(json.dumps({"default": {"error": "faked"}}))
        return SimpleNamespace(returncode=0, pid=None, wait=lambda timeout=None: 0, poll=lambda: 0)

    monkeypatch.setattr(process.subprocess, "Popen", capture)  # the process is watched while it runs (process.py)
    for device in ("cuda:0", "cpu"):
        inductor.capture_variants(resolve_problem("row_softmax"), device)
    assert seen == [([f"gpu_lock={lock_path(tmp_path, 'cuda:0')}"], "timer goes ahead"), ([], "timer goes ahead")]
