#!/usr/bin/env bash
# Serve /models: baked into the image, or pulled from a tritonbuild publish target at start
# (TRITONBUILD_TARGET=s3://bucket/prefix; the TensorRT-LLM backend needs the engine on local disk).
set -euo pipefail
if [ -n "${TRITONBUILD_TARGET:-}" ]; then
  case "$TRITONBUILD_TARGET" in
    s3://*) aws s3 sync --no-progress --delete "$TRITONBUILD_TARGET" /models ${AWS_ENDPOINT_URL:+--endpoint-url "$AWS_ENDPOINT_URL"} ;;
    *) echo "entrypoint: only s3:// targets are synced here; got $TRITONBUILD_TARGET" >&2; exit 2 ;;
  esac
fi
# A multi-GPU (or multi-instance) TensorRT-LLM model runs in orchestrator mode: its manifest entry says so.
if grep -Eq '"TRTLLM_ORCHESTRATOR": *"1"' /models/tritonbuild-manifest.json 2>/dev/null; then
  export TRTLLM_ORCHESTRATOR=1
fi
exec tritonserver --model-repository=/models --model-control-mode="${TRITON_MODEL_CONTROL:-none}" \
  --strict-readiness=true "$@"
