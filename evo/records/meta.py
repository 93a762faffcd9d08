"""The run store's meta keys (``RunStore.set_meta`` / ``get_meta``: one JSON value per key in the ``meta`` table), each
declared here once with what its value is; every module reads and writes them by these names. The strings are what
runs have always stored: renaming one would leave older ``run.db`` files unread."""
from __future__ import annotations

SCHEMA_VERSION = "schema_version"  # the store's schema (evo.records.store.SCHEMA_VERSION), set when it is made
CONFIG = "config"  # the run's composed config, a dict (kept for `kernelevo resume`; the first thing a run stores)
MANIFEST = "manifest"  # what every figure was measured on (evo.records.manifest.run_manifest)
STOP_REASON = "stop_reason"  # why the search stopped, a sentence (evo.evolution.stopping)
SUPPLY_EVALUATORS = "supply_evaluators"  # the evaluators a run started with (its supply: lambda_per_gpu)
# counters over the run's resumes (RunStore.add_infrastructure_failure, add_evaluation_cut)
INFRASTRUCTURE_FAILURES = "infrastructure_failures"  # evaluations that ended with no verdict (not stored)
EVALUATIONS_CUT = "evaluations_cut"  # evaluations killed while running at the search's budget (not stored)
# the start: where the time before the search went
START_UP = "start_up"  # seconds from the process's start to the search's, by stage (evo.runs.run.start_up)
START_UP_UNDER_LOCK = "start_up_under_lock"  # the workers' start-up under the GPU lock, resolved (fitness.evaluation)
BASELINE_WALL_S = "baseline_wall_s"  # seconds the baselines took before the search (measured or read from the cache)
BASELINE_CACHE = "baseline_cache"  # the baselines read from the machine's cache ("cached") or "measured"
BASELINE_JOBS = "baseline_jobs"  # the baseline jobs' own records (fitness.measure.baselines.jobs_text)
# compiled baselines whose TF32 kernels fail the policy, timed again with IEEE fp32 dots, name -> seconds
# (evo.runs.run.measure_ieee_baselines; a replay answers from it: evo.service.replay)
BASELINES_IEEE = "baselines_ieee_s"
TF32_INCORRECT = "tf32_incorrect"  # compiled baselines whose own kernels, as seeds, were incorrect with TF32
# generation 0 (evo.runs.seeding)
SEED_WALL_S = "seed_wall_s"  # seconds the seeds took before the search, their check excluded (it is the search's)
SEED_CHECK_S = "seed_check_s"  # the first seed judged, then the TF32 check: counted in the search's time
SEED_CAPTURE_S = "seed_capture_s"  # torch.compile's capture on its own (beside the baselines)
SEED_CACHE = "seed_cache"  # how torch.compile's seeds were got (kernelevo.seeds.inductor.cache.cache_note)
VERDICTS_REUSED = "verdicts_reused"  # generation 0's verdicts read from the machine's cache (evo.service.seed_verdicts)
REWRITTEN_SEED = "rewritten_seed"  # the seed the initialiser rewrote (llm.initialise=from_seed): made_by, key
# the best kernel at other sizes (a record each)
SIZES_CHECK = "sizes_check"  # off a GPU: the best run at other sizes (evo.runs.other_sizes)
SIZES_LABEL = "sizes_label"  # on a GPU: the best run at the problem's other sizes (evo.runs.other_sizes)

KEYS = frozenset({SCHEMA_VERSION, CONFIG, MANIFEST, STOP_REASON, SUPPLY_EVALUATORS, INFRASTRUCTURE_FAILURES,
                  EVALUATIONS_CUT, START_UP, START_UP_UNDER_LOCK, BASELINE_WALL_S, BASELINE_CACHE, BASELINE_JOBS,
                  BASELINES_IEEE, TF32_INCORRECT, SEED_WALL_S, SEED_CHECK_S, SEED_CAPTURE_S, SEED_CACHE,
                  VERDICTS_REUSED, REWRITTEN_SEED, SIZES_CHECK, SIZES_LABEL})  # every key a run stores
