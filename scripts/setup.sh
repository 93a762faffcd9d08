#!/usr/bin/env bash
# Installs kernelevo into ./.venv with its test dependencies. Idempotent: a second run only checks.
# On a machine without an NVIDIA GPU it pins the CPU build of torch (scripts/constraints-cpu.txt) before anything
# else can ask for torch: an unpinned torch pulls several GB of CUDA packages.
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$python" -m venv .venv
# pip byte-compiles nothing (--no-compile): compileall does it below, on every core and only what is out of date
pip=(.venv/bin/python -m pip install -q --disable-pip-version-check --no-compile)
constraints=()
if ! command -v nvidia-smi >/dev/null 2>&1; then
  constraints=(-c scripts/constraints-cpu.txt)
  "${pip[@]}" "${constraints[@]}" torch
fi
"${pip[@]}" "${constraints[@]}" -e ".[test]"
# Byte-code for every installed module and the project's own. Where PYTHONDONTWRITEBYTECODE is set (as on these
# machines) Python never writes a .pyc when it imports, so without this every process (each test's evaluation
# workers, each run) compiles torch's and sympy's sources anew: 1.7 s more per `import torch` here, and the test
# suite took 870 s instead of 504 s. Files that are not Python of this version (torch ships tests for 3.12's syntax)
# fail to compile and are never imported: compileall's status is not the set-up's. The installed modules are
# compiled again only when the installed distributions changed (their list is the stamp): the scan alone takes 6 s.
site=$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
stamp=.venv/kernelevo-compiled.txt
installed=$(ls "$site" | grep '\.dist-info$' || true)
if [ "$installed" != "$(cat "$stamp" 2>/dev/null)" ]; then
  .venv/bin/python -m compileall -q -j 0 "$site" >/dev/null || true
  printf '%s\n' "$installed" >"$stamp"
fi
.venv/bin/python -m compileall -q -j 0 core evo fitness operators seeds conf kernelevo hardware_profiles >/dev/null || true
