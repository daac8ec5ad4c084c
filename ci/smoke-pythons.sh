#!/usr/bin/env bash
# Every Python the README names gets a smoke build + verify, installed from wheels only (never compiled):
# tritonbuild's wheel + every extra but torch ([embedded,onnx,llm,s3,gcs,azure]; torch's wheels for other
# Pythons are the GB-sized CUDA builds, only 3.11's CPU build is on local disk) with ci/constraints.txt into a
# fresh venv per Python, then a
# Python-backend model (live in the embedded tritonserver, goldens bit for bit) and an ONNX model from a file
# (recorded, then verified in-process by onnxruntime). The embedded server's Python side is tritonbuild's own
# environment (made here on first use, under $WORK/envs); on 3.13 it runs on a Python 3.12 found on the machine.
# Last, tritonbuild[embedded] is installed into an existing environment with numpy 2 / protobuf 5 / tritonclient
# 2.72, which must keep them, and verifies a Python-backend model live from there.
# Usage: ci/smoke-pythons.sh [3.10 3.12 3.13]   (PYENV_ROOT/versions/3.X* or python3.X on PATH)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
VERSIONS=("$@")
[ ${#VERSIONS[@]} -gt 0 ] || VERSIONS=(3.10 3.12 3.13)
WORK=${SMOKE_DIR:-$ROOT/.tritonbuild-smoke}
export PIP_CACHE_DIR=${PIP_CACHE_DIR:-$HOME/.cache/pip} PIP_DISABLE_PIP_VERSION_CHECK=1
# The embedded server's environments (one per Python minor, shared by the venvs below); the exact versions of
# ci/constraints.txt go into them (PIP_CONSTRAINT is set only where tritonbuild runs: it would pin the existing
# environment's numpy 2 too). SMOKE_ENVS_DIR: where ci/test.sh already made them (the same keys: 3.10 and 3.12,
# which 3.13 runs on), so none is made twice in one run; the making itself is ci/test.sh's `embedded install`.
export TRITONBUILD_ENVS_DIR=${SMOKE_ENVS_DIR:-$WORK/envs}
# --no-compile on every install: pip byte-compiles every file of every wheel (a third of an install's CPU, one reading each:
# 33 s against 23 s for this list on 3.12), Python only what a run imports; these run beside the test suite on the
# same cores. (Not PIP_NO_COMPILE: pip reads PIP_NO_COMPILE=1 as "compile".)
unset VIRTUAL_ENV
mkdir -p "$WORK"

find_python() {
  local v=$1 p
  for p in "${PYENV_ROOT:-$HOME/.pyenv}"/versions/"$v".*/bin/python "$(command -v "python$v" || true)"; do
    [ -x "$p" ] && { echo "$p"; return 0; }
  done
  return 1
}

# Wheels only into a fresh venv: with uv (ci/uv_pip.py: pip's index settings) where ci/test.sh installed it into
# .venv, else pip. uv took 2 s and 3 CPU seconds for the list below on 3.12 where pip took 26 and 25, three times per
# run on the cores the test suite runs on; the existing environment below keeps pip: it is a user's pip install
# into what they have.
install() {
  local venv=$1; shift
  if [ -x "$ROOT/.venv/bin/uv" ]; then
    "$ROOT/.venv/bin/python" "$ROOT/ci/uv_pip.py" install -q --python "$venv/bin/python" --only-binary :all: "$@"
  else  # pip's name for uv's --reinstall
    "$venv/bin/python" -m pip install -q --no-compile --only-binary=:all: "${@/#--reinstall/--force-reinstall}" \
      2> >(grep -v "is ignored: it is neither" >&2)
  fi
}

# Our own wheel, built once (the only thing built from source).
rm -rf "$WORK/dist"
python3 -m pip wheel -q --no-deps -w "$WORK/dist" "$ROOT" 2> >(grep -v "is ignored: it is neither" >&2)
WHEEL=$(ls "$WORK"/dist/tritonbuild-*.whl)

failed=()
for v in "${VERSIONS[@]}"; do
  echo "=== Python $v"
  PY=$(find_python "$v") || { echo "Python $v: not found (PYENV_ROOT/versions/$v.* or python$v)"; failed+=("$v"); continue; }
  VENV="$WORK/venv-$v"
  [ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
  t0=$SECONDS
  # NOTE: the filter drops pip's notes about this machine's local indexes (one line per package).
  if ! install "$VENV" -c ci/constraints.txt "$WHEEL[embedded,onnx,llm,s3,gcs,azure]"; then
    failed+=("$v (install)"); continue
  fi
  # A kept venv already has a tritonbuild of an earlier commit: make it this checkout's.
  install "$VENV" --no-deps --reinstall "$WHEEL"
  echo "installed from wheels in $((SECONDS - t0)) s: $("$VENV/bin/python" -m pip list 2>/dev/null |
    grep -iE '^(numpy|onnxruntime|nvidia-pytriton|tritonclient|protobuf) ' | tr -s ' ' | tr '\n' ',')"
  D="$WORK/py$v"
  rm -rf "$D" && mkdir -p "$D/goldens"
  cp -r recipes/examples/feature_normalizer recipes/examples/feature-normalizer.yaml "$D/"
  cp recipes/examples/goldens/feature-normalizer.npz "$D/goldens/"
  cp recipes/examples/scaler/model.onnx "$D/scaler.onnx"
  cat > "$D/scaler.yaml" <<'EOF'
name: scaler
version: 1
backend: onnxruntime
source: {path: scaler.onnx}
max_batch_size: 16
verify: {goldens: goldens/scaler.npz, samples: 3}
EOF
  TB="$VENV/bin/tritonbuild"
  export TRITONBUILD_CACHE_DIR="$D/cache"
  (
    cd "$D"
    export PIP_CONSTRAINT=$ROOT/ci/constraints.txt
    "$TB" build feature-normalizer.yaml scaler.yaml -o OUT
    "$TB" verify OUT --record
    "$TB" verify OUT
    "$TB" infer OUT feature-normalizer -q
  ) || { failed+=("$v"); continue; }
  echo "Python $v: build + verify passed ($((SECONDS - t0)) s in all)"
done
# An environment people already have (numpy 2, protobuf 5, tritonclient[http] 2.72): installing tritonbuild[embedded]
# must leave those versions alone, and the core and the embedded server must work with them (ModelConfig from
# tritonclient's own schema; the server's Python side in tritonbuild's own environment).
if PY=$(find_python 3.12); then
  echo "=== existing environment (Python 3.12: numpy 2.2.6, protobuf 5.29.5, tritonclient 2.72.0)"
  t0=$SECONDS
  VENV="$WORK/venv-existing"
  [ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
  "$VENV/bin/python" -m pip install -q --no-compile --only-binary=:all: numpy==2.2.6 protobuf==5.29.5 \
    "tritonclient[http]==2.72.0" 2> >(grep -v "is ignored: it is neither" >&2)
  before=$("$VENV/bin/python" -m pip freeze 2>/dev/null | grep -iE '^(numpy|protobuf|tritonclient)==' | sort)
  "$VENV/bin/python" -m pip install -q --no-compile --only-binary=:all: --force-reinstall --no-deps "$WHEEL" \
    2> >(grep -v "is ignored: it is neither" >&2)
  "$VENV/bin/python" -m pip install -q --no-compile --only-binary=:all: "$WHEEL[embedded]" 2> >(grep -v "is ignored: it is neither" >&2)
  after=$("$VENV/bin/python" -m pip freeze 2>/dev/null | grep -iE '^(numpy|protobuf|tritonclient)==' | sort)
  D="$WORK/existing"
  rm -rf "$D" && mkdir -p "$D/goldens"
  cp -r recipes/examples/feature_normalizer recipes/examples/feature-normalizer.yaml "$D/"
  cp recipes/examples/goldens/feature-normalizer.npz "$D/goldens/"
  TB="$VENV/bin/tritonbuild"
  if [ "$before" != "$after" ]; then
    echo "installing tritonbuild[embedded] changed the environment:"; diff <(echo "$before") <(echo "$after") || true
    failed+=("existing environment (versions moved)")
  elif ! (cd "$D" && export TRITONBUILD_CACHE_DIR="$D/cache" PIP_CONSTRAINT=$ROOT/ci/constraints.txt &&
          "$TB" build feature-normalizer.yaml -o OUT && "$TB" verify OUT); then
    failed+=("existing environment (build + verify)")
  elif [ "$("$VENV/bin/python" -m pip freeze 2>/dev/null | grep -iE '^(numpy|protobuf|tritonclient)==' | sort)" \
         != "$before" ]; then
    failed+=("existing environment (versions moved by verify)")
  else
    echo "existing environment kept $(echo "$after" | tr '\n' ' ')and built + verified live ($((SECONDS - t0)) s)"
  fi
fi
if [ ${#failed[@]} -gt 0 ]; then
  echo "smoke FAILED on: ${failed[*]}"
  exit 1
fi
echo "smoke passed on Python ${VERSIONS[*]}"
