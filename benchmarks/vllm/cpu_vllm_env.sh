#!/usr/bin/env bash
# vLLM 0.22.0's Python modules importable on a CPU machine (no GPU, no vLLM install): its wheel and the pure-Python
# packages its import chain needs (found by importing, 2026-12-07) into one folder, used with the dev venv's torch:
#   bash benchmarks/vllm/cpu_vllm_env.sh /tmp/vllm_t
#   PYTHONPATH=/tmp/vllm_t .venv/bin/python -m pytest tests/unit/backends/test_vllm_plugin_real.py \
#       tests/unit/backends/test_vllm_sampling.py
# The wheel comes from make_parts.sh's cache (WHEEL_CACHE, default ~/.cache/tritonbuild-gpu-wheels) or PyPI.
set -euo pipefail
DEST=${1:?usage: cpu_vllm_env.sh DEST}
PIP=${PIP:-.venv/bin/pip}
CACHE=${WHEEL_CACHE:-$HOME/.cache/tritonbuild-gpu-wheels}
WHEEL=$CACHE/vllm-0.22.0-cp38-abi3-manylinux_2_28_x86_64.whl
[ -f "$WHEEL" ] || "$PIP" download -q vllm==0.22.0 --no-deps -d "$CACHE"
"$PIP" install -q --no-deps --target "$DEST" "$WHEEL"
"$PIP" install -q --target "$DEST" transformers==5.17.0
"$PIP" install -q --no-deps --target "$DEST" cbor2==6.3.0 pyzmq==27.3.0 gguf==0.19.0 openai-harmony==0.0.8 \
  openai sniffio==1.3.1 msgspec==0.23.0 cloudpickle pybase64==1.5.1 cachetools uvloop py-cpuinfo
PYTHONPATH=$DEST ${PYTHON:-.venv/bin/python} -c \
  "import vllm.v1.sample.ops.topk_topp_sampler, vllm.model_executor.kernels.linear; print('vllm imports from $DEST')"
