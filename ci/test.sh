#!/usr/bin/env bash
# The project's test command (README, second command; .ci/run calls it). Works on a clean clone:
# creates .venv if needed, installs the project with its test extras, runs the whole suite.
#   ci/test.sh --fast [ARGS]: the fast lane (unit + CLI mapping; no server, no export, no slow test), for
#   the edit-test loop; reuses an installed .venv. .ci/run runs the whole suite.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
# Every interpreter of the run keeps its bytecode, under .tritonbuild-pycache/ (ignored by git; nothing written
# beside a source file: a recipe's model.py or a repository's stays alone in its folder). An environment with
# PYTHONDONTWRITEBYTECODE=1 (these machines set it) made each one compile everything it imported from source: a
# `python -m tritonbuild publish` to S3 spent 3.2 CPU seconds starting instead of 1.0, each xdist worker 14
# collecting instead of 5.5, and the run starts hundreds of them (tests/conftest.py does the same for a pytest
# started by hand). What the embedded server's Python stub writes is not this: the launcher sets the variable
# for it (builder/server/launcher.py). A caller's own prefix is kept.
unset PYTHONDONTWRITEBYTECODE
export PYTHONPYCACHEPREFIX="${PYTHONPYCACHEPREFIX:-$PWD/.tritonbuild-pycache}"
FAST=0
if [ "${1:-}" = "--fast" ]; then
  FAST=1
  shift
  set -- -m "not slow and not triton and not s3 and not gpu" tests/unit tests/cli tests/contracts tests/docs "$@"
fi
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
# Azure's own Blob emulator for the az:// publish tests (tests/integration/test_publish_gcs_azure.py skips
# them without it): Azurite from npm, pinned. Not in the fast lane. npm's install is 360 MB of node_modules (33 s,
# 26 CPU seconds on the 2 cores pip's install needs too), so it is made once per machine and version, like the
# embedded server's environments: under the user's cache directory (made beside, then moved into place, so a
# concurrent run never sees half of it), and .tritonbuild-node (ignored by git) points at it.
AZURITE=3.37.0
node_dir="${XDG_CACHE_HOME:-$HOME/.cache}/tritonbuild-ci/azurite-$AZURITE"
npm_pid=""
if [ "$FAST" = 0 ] && command -v npm >/dev/null; then
  if [ ! -x "$node_dir/node_modules/.bin/azurite-blob" ]; then
    mkdir -p "$(dirname "$node_dir")"
    ( tmp=$(mktemp -d "$node_dir.XXXXXX") &&
      npm install --silent --no-audit --no-fund --prefix "$tmp" "azurite@$AZURITE" &&
      { mv -T "$tmp" "$node_dir" 2>/dev/null || rm -rf "$tmp"; } ) &  # a concurrent run's, if it came first
    npm_pid=$!
  fi
  [ -L .tritonbuild-node ] || rm -rf .tritonbuild-node
  ln -sfn "$node_dir" .tritonbuild-node
fi
if [ "$FAST" = 0 ] || [ ! -x .venv/bin/tritonbuild ]; then
  # Exact versions from ci/constraints.txt (torch==2.13.0 is the CPU build on local disk on these machines),
  # installed by uv (its version from ci/constraints.txt too) with pip's own index settings (ci/uv_pip.py): the
  # same 192 distributions as pip's install, in 19 s and 14 CPU seconds with an empty uv cache where pip took
  # 109 s and 70. uv compiles no bytecode: Python compiles what the run imports (torch has 4,000 files).
  .venv/bin/python -m pip install -q --no-compile --disable-pip-version-check -c ci/constraints.txt uv
  .venv/bin/python ci/uv_pip.py install -q -c ci/constraints.txt -e '.[test]'
fi
# The embedded tritonserver's own environment (nvidia-pytriton, numpy < 2: builder/server/toolenv.py), made before
# the tests (they only find it; ~10 s the first time, nothing once made), with the exact versions of constraints.
# A .venv made before then still holds nvidia-pytriton (the test extra had it), which would be used as it is:
# removed, so every run finds the server as a clean clone does.
if .venv/bin/python -m pip show -q nvidia-pytriton >/dev/null 2>&1; then
  .venv/bin/python -m pip uninstall -q -y --disable-pip-version-check nvidia-pytriton
fi
PIP_CONSTRAINT="$PWD/ci/constraints.txt" .venv/bin/tritonbuild embedded install &
embedded_pid=$!
# The environments for the target images' Pythons (verify --triton-image: 3.10 for a 24.10 image, 3.12 from
# 24.11; a recipe's image too: a TensorRT-LLM recipe's 25.xx runs 3.12), where this machine has those Pythons
# (pyenv here): one pip install each the first time (~30 s, about 220 MB), nothing once made; the fast lane too,
# whose LLM tests verify on 3.12. tests/integration/test_target_python.py skips without them. What the models
# import is installed for those Pythons by the tests themselves, on first use (server/mirror.py: seconds).
# The three environments are made side by side (each under its own key and lock; pip's installs overlap the
# registry waits of the others), and all are in place before the tests start.
image_pids=()
for image in 24.10-py3 25.01-py3; do
  { PIP_CONSTRAINT="$PWD/ci/constraints.txt" .venv/bin/tritonbuild embedded install --triton-image "$image" \
      >/dev/null || echo "ci/test.sh: no environment for $image's Python; its tests will skip" >&2; } &
  image_pids+=($!)
done
wait "$embedded_pid"
wait "${image_pids[@]}"
# Azurite (installed beside pip's install, above) must be in place before the tests start.
if [ -n "$npm_pid" ]; then
  wait "$npm_pid" || echo "ci/test.sh: azurite did not install; the az:// emulator tests will skip" >&2
fi
# Chromium from the system's packages for the docs site's browser test (tests/docs/test_browser.py skips without
# it, saying so). Not in the fast lane; only where apt-get can install (root).
if [ "$FAST" = 0 ] && ! command -v chromium >/dev/null && command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
  { apt-get install -y -q chromium >/dev/null 2>&1 || { apt-get update -q >/dev/null 2>&1 &&
      apt-get install -y -q chromium >/dev/null 2>&1; }; } \
    || echo "ci/test.sh: chromium did not install; the docs site's browser test will skip" >&2
fi
# perf_analyzer (from tritonclient 2.51's wheel) for the test that runs `export perf-data` output through it;
# that test skips without it. Not in the fast lane.
if [ "$FAST" = 0 ] && [ -z "${TRITONBUILD_PERF_ANALYZER:-}" ]; then
  TRITONBUILD_PERF_ANALYZER=$(ci/perf_analyzer.sh) && export TRITONBUILD_PERF_ANALYZER \
    || echo "ci/test.sh: perf_analyzer did not install; its test will skip" >&2
fi
# NOTE: the embedded tritonserver's Python stub imports this venv's packages; keep the caller's
# VIRTUAL_ENV (if any) from leaking into it.
unset VIRTUAL_ENV
.venv/bin/ruff check builder tests benchmarks ci/docs_reference.py ci/docs_environment.py ci/docs_backend.py
.venv/bin/ruff format --check builder tests benchmarks ci
# Every Python the README names (3.10, 3.12, 3.13; this venv is 3.11) and an existing numpy 2 environment: a
# smoke build + verify from wheels only, in venvs of their own (about 5 minutes with fresh venvs and a warm pip
# cache). It runs beside the test suite (most of its time is pip and server starts, not CPU) and its log is
# printed when both have ended; either failing fails the run. Not in the fast lane; TRITONBUILD_SMOKE=0 skips it.
smoke_pid=""
if [ "$FAST" = 0 ] && [ "${TRITONBUILD_SMOKE:-1}" != 0 ]; then
  mkdir -p .tritonbuild-smoke
  SMOKE_ENVS_DIR=$(.venv/bin/python -c "from tritonbuild.server.toolenv import envs_dir; print(envs_dir())") \
    ci/smoke-pythons.sh > .tritonbuild-smoke/smoke.log 2>&1 &
  smoke_pid=$!
fi
# The full run: tests spread over worker processes (pytest-xdist; most tests wait on a tritonserver, a
# moto_server or a subprocess, so more workers than cores pays: TRITONBUILD_TEST_WORKERS, default 6), a module's
# tests kept on one worker (module-scoped builds run once), the heaviest scopes first (tests/conftest.py); it names
# its 20 slowest tests. --no-loadscope-reorder: xdist (>= 3.7) otherwise queues the scopes by their number of
# tests, not in that order (runs before 482a25c started the 5-minute tune module 222 s in). Clean clones' times are
# in docs/development.md.
# On a clean clone .tritonbuild-pycache/ is empty, and the 6 workers would each compile every module the suite
# imports (torch's too) at once: 6 x 15 CPU seconds of collection where one cold collection and 6 warm ones take
# 15 + 6 x 6. One collection here first (its failures are the run's own to report, below).
if [ "$FAST" = 0 ]; then
  .venv/bin/python -m pytest --collect-only -q -p no:xdist -p no:cacheprovider "$@" >/dev/null 2>&1 || true
  set -- -n "${TRITONBUILD_TEST_WORKERS:-6}" --dist loadscope --no-loadscope-reorder --durations=20 "$@"
fi
rc=0
.venv/bin/python -m pytest -q "$@" || rc=$?
if [ -n "$smoke_pid" ]; then
  smoke_rc=0
  wait "$smoke_pid" || smoke_rc=$?
  echo "=== ci/smoke-pythons.sh (ran beside the tests), exit $smoke_rc"
  cat .tritonbuild-smoke/smoke.log
  [ "$smoke_rc" = 0 ] || rc=$smoke_rc
fi
exit "$rc"
