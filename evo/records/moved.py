"""Where the modules of evo/ and fitness/ lived before they moved into subpackages (issue 46), for the dotted
paths a run stored then: its config's ``_target_`` values (the selection, the strategy, the evaluation backend, the
bench backend). ``current_targets`` maps them when the run store reads a config back (``evo.records.store``), so a run
made before the move resumes and reports. Written by the reorganisation script from its tables; edit them there.
"""
from __future__ import annotations

MOVED = {
    "evo.anytime": "evo.reports.anytime",
    "evo.bench": "evo.benchmark.bench",
    "evo.bench_interrupt": "evo.benchmark.bench_interrupt",
    "evo.bench_ray": "evo.benchmark.bench_ray",
    "evo.bench_report": "evo.benchmark.bench_report",
    "evo.bench_table": "evo.benchmark.bench_table",
    "evo.checkpoint": "evo.records.checkpoint",
    "evo.claim": "evo.records.claim",
    "evo.console": "evo.reports.console",
    "evo.evaluation": "evo.service.evaluation",
    "evo.evaluation_protocol": "evo.service.evaluation_protocol",
    "evo.evaluation_ray": "evo.service.evaluation_ray",
    "evo.full_size": "evo.runs.other_sizes",
    "evo.intervals": "evo.reports.intervals",
    "evo.loop": "evo.evolution.loop",
    "evo.manifest": "evo.records.manifest",
    "evo.multirun": "evo.benchmark.multirun",
    "evo.outcome": "evo.reports.outcome",
    "evo.page": "evo.reports.page",
    "evo.progress": "evo.runs.progress",
    "evo.ray_cluster": "evo.service.ray_cluster",
    "evo.replay": "evo.service.replay",
    "evo.report": "evo.reports.report",
    "evo.report_html": "evo.reports.report_html",
    "evo.run": "evo.runs.run",
    "evo.search": "evo.evolution.search",
    "evo.seeding": "evo.runs.seeding",
    "evo.selection": "evo.evolution.selection",
    "evo.start_gate": "evo.runs.start_gate",
    "evo.stopping": "evo.evolution.stopping",
    "evo.store": "evo.records.store",
    "evo.strategies_report": "evo.benchmark.strategies_report",
    "evo.strategy": "evo.evolution.strategy",
    "evo.toolbox": "evo.evolution.toolbox",
    "evo.tuner": "evo.tuning.tuner",
    "evo.tuning_memory": "evo.tuning.tuning_memory",
    "fitness.atomic": "fitness.common.atomic",
    "fitness.baseline_cache": "fitness.measure.baseline_cache",
    "fitness.baselines": "fitness.measure.baselines",
    "fitness.candidate": "fitness.judge.candidate",
    "fitness.checks": "fitness.judge.checks",
    "fitness.compile_ahead": "fitness.judge.compile_ahead",
    "fitness.confine": "fitness.workers.confine",
    "fitness.correctness": "fitness.comparison.correctness",
    "fitness.coverage": "fitness.judge.coverage",
    "fitness.dependence": "fitness.problems.dependence",
    "fitness.evaluating": "fitness.evaluation.evaluating",
    "fitness.evaluator": "fitness.evaluation.evaluator",
    "fitness.formatting": "fitness.common.formatting",
    "fitness.from_config": "fitness.evaluation.from_config",
    "fitness.fused_compare": "fitness.comparison.fused_compare",
    "fitness.gpu_lock": "fitness.common.gpu_lock",
    "fitness.guards": "fitness.judge.guards",
    "fitness.inputs": "fitness.judge.inputs",
    "fitness.integrity": "fitness.judge.integrity",
    "fitness.job_clock": "fitness.workers.job_clock",
    "fitness.lifeline": "fitness.common.lifeline",
    "fitness.memory": "fitness.measure.memory",
    "fitness.ncu": "fitness.workers.ncu",
    "fitness.ncu_target": "fitness.workers.ncu_target",
    "fitness.phases": "fitness.judge.phases",
    "fitness.plan": "fitness.evaluation.plan",
    "fitness.policy": "fitness.comparison.policy",
    "fitness.problem": "fitness.problems.problem",
    "fitness.problem_spec": "fitness.problems.problem_spec",
    "fitness.result": "fitness.measure.result",
    "fitness.rounding": "fitness.judge.rounding",
    "fitness.sandbox": "fitness.workers.sandbox",
    "fitness.sizes": "fitness.problems.sizes",
    "fitness.speed_of_light": "fitness.problems.speed_of_light",
    "fitness.stage": "fitness.common.stage",
    "fitness.static_check": "fitness.judge.static_check",
    "fitness.target": "fitness.problems.target",
    "fitness.timed_inputs": "fitness.judge.timed_inputs",
    "fitness.timing": "fitness.measure.timing",
    "fitness.trials": "fitness.judge.trials",
    "fitness.warm": "fitness.workers.warm",
    "fitness.worker": "fitness.workers.worker",
    "fitness.worker_env": "fitness.workers.worker_env",
    "fitness.zygote": "fitness.workers.zygote",
}


def current(path: str) -> str:
    """`path` (a dotted module or ``module.Name``) where it lives now."""
    for old in sorted(MOVED, key=len, reverse=True):
        if path == old or path.startswith(old + "."):
            return MOVED[old] + path[len(old):]
    return path


def current_targets(config):
    """`config` (a stored run config: dicts and lists) with every ``_target_`` at its module's current path."""
    if isinstance(config, dict):
        return {key: current(value) if key == "_target_" and isinstance(value, str) else current_targets(value)
                for key, value in config.items()}
    if isinstance(config, list):
        return [current_targets(value) for value in config]
    return config
