# Sourced by the scripts of experiments/scale/ that run on a lent GPU machine: the carried wheels installed into
# SITE (/tmp/site) once per machine, Ray from .ray when asked, and the environment every job there shares.
#   source experiments/scale/device_env.sh [WHEELS_DIR [ray]]     # WHEELS_DIR: .whl, or .whl-core without the LLM's
SITE=${SITE:-/tmp/site}
# once per machine: a second script running beside the first (one per GPU) must not reinstall under it
[ -d "$SITE/deap" ] || python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target "$SITE" "${1:-.whl}"/*.whl || return 1
if [ "${2:-}" = ray ] && [ ! -d "$SITE/ray" ]; then
  python3 -m zipfile -e .ray/ray-slim.zip "$SITE" && chmod +x "$SITE/ray/core/src/ray/gcs/gcs_server" \
    "$SITE/ray/core/src/ray/raylet/raylet" && python3 -m pip install -q --no-index --no-deps --no-compile \
    --target "$SITE" .ray/*.whl || return 1
fi
export PYTHONPATH=$SITE:$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1 HOME=/tmp/home XDG_CACHE_HOME=/tmp/home/.cache
mkdir -p "$HOME"
