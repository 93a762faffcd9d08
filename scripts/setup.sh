#!/usr/bin/env bash
# Installs kernelevo into ./.venv with its test dependencies. Idempotent: a second run only checks.
# On a machine without an NVIDIA GPU it pins the CPU build of torch (scripts/constraints-cpu.txt) in every install:
# an unpinned torch pulls several GB of CUDA packages.
# The packages are installed by uv (from PyPI, into the venv: parallel downloads and installs, byte-code of what it
# installs on every core), with pip's configuration of this machine (scripts/uv_pip_install.py); where uv cannot be
# installed or fails, by pip as before.
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$python" -m venv .venv
constraints=()
command -v nvidia-smi >/dev/null 2>&1 || constraints=(-c scripts/constraints-cpu.txt)
pip=(.venv/bin/python -m pip install -q --disable-pip-version-check)

# Byte-code for every installed module: where PYTHONDONTWRITEBYTECODE is set (as on these machines) Python never
# writes a .pyc when it imports, so without it every process (each test's evaluation workers, each run) compiles
# torch's and sympy's sources anew: 1.7 s more per `import torch` here, and the test suite took 870 s instead of 504 s.
with_uv() {
  [ -x .venv/bin/uv ] || "${pip[@]}" "uv>=0.5" || return 1
  .venv/bin/python scripts/uv_pip_install.py -q --compile-bytecode "${constraints[@]}" -e ".[test]"
}

with_pip() {
  # pip byte-compiles nothing (--no-compile): compileall does it below, on every core and only what is out of date
  [ ${#constraints[@]} -eq 0 ] || "${pip[@]}" --no-compile "${constraints[@]}" torch
  "${pip[@]}" --no-compile "${constraints[@]}" -e ".[test]"
  # Files that are not Python of this version (torch ships tests for 3.12's syntax) fail to compile and are never
  # imported: compileall's status is not the set-up's. The installed modules are compiled again only when the
  # installed distributions changed (their list is the stamp): the scan alone takes 6 s.
  local site stamp installed
  site=$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  stamp=.venv/kernelevo-compiled.txt
  installed=$(ls "$site" | grep '\.dist-info$' || true)
  if [ "$installed" != "$(cat "$stamp" 2>/dev/null)" ]; then
    .venv/bin/python -m compileall -q -j 0 "$site" >/dev/null || true
    printf '%s\n' "$installed" >"$stamp"
  fi
}

if ! with_uv; then
  echo "setup.sh: uv could not install the packages (above); installing them with pip" >&2
  with_pip
fi
.venv/bin/python -m compileall -q -j 0 evo fitness operators kernelevo hardware_profiles >/dev/null || true
