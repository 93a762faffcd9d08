"""``WorkerResult``: the keys a worker's result may carry, and the verdict an ``EvalResult`` takes over from it;
``WorkerJob``: the job a worker is sent."""
import json

import pytest

from kernelevo.core.evaluation_record import EvalResult

from fitness.measure.result import WorkerJob, WorkerResult
from fitness.settings import EvalSettings, TimingSettings


def test_a_key_no_reader_knows_is_named_not_dropped():
    with pytest.raises(ValueError, match=r"keys \['trails_passed'\].*add them to WorkerResult"):
        WorkerResult.from_dict({"status": "ok", "trails_passed": 3})


def test_the_verdict_is_what_the_worker_set_of_the_fields_an_eval_result_has():
    data = WorkerResult.from_dict({"status": "incorrect", "reason": "trial 1", "trials_passed": 1,
                                   "max_abs_err": 0.5, "guards": {"labels": []}, "input_seed": 7, "notes": ["n"],
                                   "phases_s": {"setup": 0.1}, "worker": {"pid": 3}, "internal_error": False})
    assert data.verdict() == {"trials_passed": 1, "max_abs_err": 0.5, "guards": {"labels": []}, "input_seed": 7,
                              "phases_s": {"setup": 0.1}}
    result = EvalResult("ok", timing={"kept": 1})
    for key, value in data.verdict().items():
        setattr(result, key, value)
    assert result.timing == {"kept": 1} and result.rel_l2 is None and result.spans == []  # unset: left as they were


def test_every_job_kind_reads_back():
    for data in ({"status": "ok", "timing": {"eager": {}}, "failed": {}, "notes": ["fp32"]},  # baseline
                 {"status": "ok", "profile": {"kernels": []}}, {"status": "ok", "prewarm": "ok"},
                 {"status": "runtime_error", "internal_error": True, "infrastructure": True, "reason": "CUDA"}):
        assert WorkerResult.from_dict(data).status == data["status"]


def test_the_job_crosses_to_the_worker_typed_with_its_defaults_filled_in_one_place():
    """``WorkerJob``: what the evaluator sends, serialised by ``to_json`` and read by ``from_dict``; the judge's
    settings arrive whole (the timing's defaults filled in by ``TimingSettings``, never merged back by a reader)."""
    job = WorkerJob("candidate", "cpu", settings=EvalSettings(timing={"interpreter_reps": 1}), source="X = 1\n",
                    coverage_inputs=[0], input_names=["x"])
    read = WorkerJob.from_dict(json.loads(job.to_json()))
    assert read == job and isinstance(read.settings, EvalSettings) and isinstance(read.settings.timing, TimingSettings)
    assert read.settings.timing.interpreter_reps == 1
    assert read.settings.timing.checked_calls == TimingSettings().checked_calls  # a default, from its one home
    assert WorkerJob.from_dict({"kind": "prewarm", "device": "cpu"}).settings == EvalSettings()
    with pytest.raises(ValueError, match=r"a worker's job has keys \['sede'\].*add them to WorkerJob"):
        WorkerJob.from_dict({**json.loads(job.to_json()), "sede": 3})
