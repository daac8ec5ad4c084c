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
# Several invariant models each ship the same plugin wheel: one Python holds one copy of a distribution, so each
# distinct wheel is installed once (the same distribution from two paths is pip's ResolutionImpossible). Two
# models shipping different builds of one distribution were verified with different plugins; one of them would
# run with a plugin it was not verified with: refused (exit 2) before anything is installed.
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
      error) echo "entrypoint: $value" >&2; exit 2 ;;
    esac
  done < <(python3 - "$MODELS/tritonbuild-manifest.json" <<'PY'
import hashlib, json, os, re, sys
lines, wheels = [], {}  # distribution -> {sha256: (model, path, version)}
root = os.path.dirname(sys.argv[1])
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
    for rel in serving.get("plugins", []):
        path = f"{m['name']}/{m['version']}/{rel}"
        try:
            digest = hashlib.sha256(open(os.path.join(root, path), "rb").read()).hexdigest()
        except OSError as e:
            lines.append(("error", f"{m['name']}: its plugin wheel {path} cannot be read ({e.strerror})"))
            continue
        dist, version = os.path.basename(rel).split("-")[:2]  # PEP 427: {distribution}-{version}-...
        builds = wheels.setdefault(re.sub(r"[-_.]+", "_", dist).lower(), {})
        builds.setdefault(digest, (m["name"], path, version))
    lines += [("env", f"{k}={v}") for k, v in sorted((m.get("numerics") or {}).get("env", {}).items())]
for dist, builds in sorted(wheels.items()):
    if len(builds) > 1:
        shown = "; ".join(f"{model} ships {version} ({path})" for model, path, version in builds.values())
        lines.append(("error", f"the models ship different builds of the plugin {dist}, and one Python holds one: "
                      f"{shown}. Each was verified with its own; rebuild them with one tritonbuild (the same "
                      "wheel), or serve them from separate images"))
    lines += [("wheel", path) for _, path, _ in list(builds.values())[:1]]
errors = [line for line in lines if line[0] == "error"]
for line in dict.fromkeys(errors or lines):
    print(*line, sep="\t")
PY
)
fi
if [ "${#wheels[@]}" -gt 0 ]; then
  "${TRITONBUILD_PIP:-pip}" install --no-cache-dir --no-deps --no-index "${wheels[@]}"
fi
exec "${launch[@]}" tritonserver --model-repository="$MODELS" --model-control-mode="${TRITON_MODEL_CONTROL:-none}" \
  --strict-readiness="${TRITONBUILD_STRICT_READINESS:-true}" "${extra[@]}" "$@"
