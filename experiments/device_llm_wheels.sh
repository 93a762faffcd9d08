#!/usr/bin/env bash
# The LLM path on the GPU machine (experiments/llm_prompt_examples.py): after `../shared/device/wheels.sh --with-llm`,
# adds to .whl/ the wheels its list lacks for litellm 1.110 / openai 3.57 (measured on the H100 2026-11-25: the
# import failed on httpx2, then sniffio), the reply cache's diskcache and the client's retries' tenacity (pure Python;
# not in that list). Carry .whl as the wheels.sh header says.
#   bash ../shared/device/wheels.sh --with-llm && bash experiments/device_llm_wheels.sh
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform any \
  -d .whl httpx2==2.16.2 httpcore2==2.16.2 truststore==0.10.5 sniffio==1.3.1 pydantic-settings==2.16.3 \
  importlib-metadata==8.9.0 zipp==4.1.2 click==8.5.1 diskcache==5.6.3 tenacity==9.2.1 \
  h2==4.4.1 hpack==4.2.0 hyperframe==6.1.0
du -sh .whl
