"""Hardware profiles: every bundled YAML loads, live devices are matched by name, unknown GPUs get a built one."""
from types import SimpleNamespace

import pytest

from kernelevo.core.errors import KernelevoError
from hardware_profiles import available_profiles, load_profile, profile_for_device_name, profile_from_properties

REQUIRED = {"h100_sxm", "h100_pcie", "h200", "a100_80gb", "l40s", "rtx_4090", "cpu_interpreter"}


def test_required_profiles_exist():
    assert REQUIRED <= set(available_profiles())


@pytest.mark.parametrize("name", sorted(REQUIRED - {"cpu_interpreter"}))
def test_gpu_profiles_have_the_figures_the_search_needs(name):
    p = load_profile(name)
    assert p.kind == "gpu" and p.sm_count > 0 and p.l2_cache_bytes > 0
    assert p.shared_memory_per_block_bytes <= p.shared_memory_per_sm_bytes
    assert p.memory_bandwidth_bytes_per_s > 1e11
    assert p.peak("fp32") < p.peak("bf16")  # tensor cores beat the fp32 pipe on every listed GPU
    assert p.peak("tf32") >= p.peak("fp32")


@pytest.mark.parametrize("device_name, profile", [
    ("NVIDIA H100 80GB HBM3", "h100_sxm"), ("NVIDIA H100 PCIe", "h100_pcie"), ("NVIDIA H200", "h200"),
    ("NVIDIA A100-SXM4-80GB", "a100_80gb"), ("NVIDIA L40S", "l40s"), ("NVIDIA GeForce RTX 4090", "rtx_4090"),
])
def test_devices_are_matched_by_name(device_name, profile):
    assert profile_for_device_name(device_name).name == profile


def test_unknown_gpu_gets_a_profile_from_its_properties_with_unknown_peaks():
    props = SimpleNamespace(name="NVIDIA Future GPU", multi_processor_count=200, L2_cache_size=128 << 20,
                            shared_memory_per_block_optin=300_000, shared_memory_per_multiprocessor=310_000,
                            max_threads_per_block=1024, regs_per_multiprocessor=65536, major=11, minor=0)
    assert profile_for_device_name(props.name) is None
    p = profile_from_properties(props)
    assert (p.sm_count, p.l2_cache_bytes, p.peaks_known) == (200, 128 << 20, False)
    assert p.peak("bf16") is None


def test_unknown_profile_name_lists_the_choices():
    with pytest.raises(KernelevoError, match="h100_sxm"):
        load_profile("h900")


def test_start_ups_leave_the_gpu_lock_only_where_measured_harmless_or_asked():
    """fitness.start_up_under_lock=null follows the profile's measurement; an explicit value wins."""
    from dataclasses import replace

    from fitness.evaluation.evaluator import EvalSettings, start_up_under_lock

    h200, h100 = load_profile("h200"), load_profile("h100_sxm")
    assert h200.start_up_disturbs_timing is False and h100.start_up_disturbs_timing is None  # measured / not
    auto = EvalSettings()
    assert start_up_under_lock(auto, h200) is False
    assert start_up_under_lock(auto, h100) is True
    assert start_up_under_lock(auto, replace(h200, start_up_disturbs_timing=True)) is True
    assert start_up_under_lock(EvalSettings(start_up_under_lock=True), h200) is True
    assert start_up_under_lock(EvalSettings(start_up_under_lock=False), h100) is False
