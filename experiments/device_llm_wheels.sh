#!/usr/bin/env bash
# The LLM path on the GPU machine (experiments/llm_prompt_examples.py): after `../shared/device/wheels.sh --with-llm`,
# adds to .whl/ the wheels its list lacks for litellm 1.110 / openai 3.57 (measured on the H100 2026-11-25: the
# import failed on httpx2, then sniffio), the reply cache's diskcache and the client's retries' tenacity (pure Python;
# not in that list). Carry .whl as the wheels.sh header says. litellm's wheel (44 MB) with the repository (21 MB) passes
# the device tool's 64 MiB carry, so it is repacked: its proxy's web UI (unused by a client) left out, xz-compressed to
# .whl/litellm.tar.xz (about 21 MB, two minutes here), which the LLM scripts unpack beside the wheels.
#   bash ../shared/device/wheels.sh --with-llm && bash experiments/device_llm_wheels.sh
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform any \
  -d .whl httpx2==2.16.2 httpcore2==2.16.2 truststore==0.10.5 sniffio==1.3.1 pydantic-settings==2.16.3 \
  importlib-metadata==8.9.0 zipp==4.1.2 click==8.5.1 diskcache==5.6.3 tenacity==9.2.1 \
  h2==4.4.1 hpack==4.2.0 hyperframe==6.1.0
wheel=$(ls .whl/litellm-*.whl 2>/dev/null || true)
if [ -n "$wheel" ]; then
  tmp=$(mktemp -d)
  python3 -m zipfile -e "$wheel" "$tmp"
  proxy="$tmp"/litellm/proxy
  rm -rf "$proxy"/_experimental "$proxy"/swagger "$proxy"/_lazy_openapi_snapshot.json
  tar -C "$tmp" -cf - litellm "$(basename "$tmp"/litellm-*.dist-info)" | xz -9 -T0 > .whl/litellm.tar.xz
  rm -rf "$tmp" "$wheel"
fi
du -sh .whl
