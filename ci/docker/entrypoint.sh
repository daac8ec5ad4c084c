#!/usr/bin/env bash
# Serve /models: baked into the image, or pulled from a tritonbuild publish target at start
# (TRITONBUILD_TARGET=s3://bucket/prefix; the TensorRT-LLM backend needs the engine on local disk).
# TRITONBUILD_STRICT_READINESS=false (deploy-snippets' custom-image variant): /v2/health/ready stays true while a
# model loads; the readiness probe judges the models.
set -euo pipefail
MODELS="${TRITONBUILD_MODELS:-/models}"
if [ -n "${TRITONBUILD_TARGET:-}" ]; then
  case "$TRITONBUILD_TARGET" in
    s3://*) aws s3 sync --no-progress --delete "$TRITONBUILD_TARGET" "$MODELS" ${AWS_ENDPOINT_URL:+--endpoint-url "$AWS_ENDPOINT_URL"} ;;
    *) echo "entrypoint: only s3:// targets are synced here; got $TRITONBUILD_TARGET" >&2; exit 2 ;;
  esac
fi
# A multi-GPU (or multi-instance) TensorRT-LLM model runs in orchestrator mode; its manifest entry says how
# upstream's launcher starts it (llm.server_launch: environment, `mpirun -n 1`, memory-pool arguments).
# A vLLM model served invariant (llm.serving) needs its environment (VLLM_BATCH_INVARIANT=1) and its plugin wheels
# (shipped in its version directory) installed into the image's Python before the server starts. A model with
# portable numerics (numerics.env: MKL's reproducibility branch, ATen/oneDNN ISA, thread counts) needs its variables
# set before the Python backend's stubs load their math libraries.
launch=()
extra=()
wheels=()
if [ -f "$MODELS/tritonbuild-manifest.json" ]; then
  while IFS=$'\t' read -r kind value; do
    case "$kind" in
      env) export "${value?}" ;;
      launcher) read -r -a launch <<< "$value" ;;
      arg) extra+=("$value") ;;
      wheel) wheels+=("$MODELS/$value") ;;
    esac
  done < <(python3 - "$MODELS/tritonbuild-manifest.json" <<'PY'
import json, sys
lines = []
models = json.load(open(sys.argv[1])).get("models", [])
if isinstance(models, dict):  # a publish target's manifest (TRITONBUILD_TARGET): its live versions' numerics
    for state in models.values():
        live = (state.get("versions") or {}).get(str(state.get("live"))) or {}
        lines += [("env", f"{k}={v}") for k, v in sorted((live.get("numerics") or {}).get("env", {}).items())]
    models = []
for m in models:
    spec = (m.get("llm") or {}).get("server_launch") or {}
    lines += [("env", f"{k}={v}") for k, v in sorted(spec.get("env", {}).items())]
    lines += [("launcher", " ".join(spec["launcher"]))] if spec.get("launcher") else []
    lines += [("arg", a) for a in spec.get("args", [])]
    serving = (m.get("llm") or {}).get("serving") or {}
    lines += [("env", f"{k}={v}") for k, v in sorted(serving.get("env", {}).items())]
    lines += [("wheel", f"{m['name']}/{m['version']}/{rel}") for rel in serving.get("plugins", [])]
    lines += [("env", f"{k}={v}") for k, v in sorted((m.get("numerics") or {}).get("env", {}).items())]
for line in dict.fromkeys(lines):
    print(*line, sep="\t")
PY
)
fi
if [ "${#wheels[@]}" -gt 0 ]; then
  "${TRITONBUILD_PIP:-pip}" install --no-cache-dir --no-deps --no-index "${wheels[@]}"
fi
exec "${launch[@]}" tritonserver --model-repository="$MODELS" --model-control-mode="${TRITON_MODEL_CONTROL:-none}" \
  --strict-readiness="${TRITONBUILD_STRICT_READINESS:-true}" "${extra[@]}" "$@"
