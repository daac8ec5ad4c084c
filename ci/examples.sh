#!/usr/bin/env bash
# The README's first command: install, build the bundled examples, verify them in the embedded tritonserver.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q --disable-pip-version-check -c ci/constraints.txt -e '.[test]'
unset VIRTUAL_ENV
# The embedded tritonserver's own environment (nvidia-pytriton, numpy < 2), beside .venv, not in it
PIP_CONSTRAINT="$PWD/ci/constraints.txt" .venv/bin/tritonbuild embedded install
.venv/bin/tritonbuild build recipes/examples -o model_repository
.venv/bin/tritonbuild verify model_repository
