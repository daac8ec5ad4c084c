#!/usr/bin/env bash
# The README's first command: install, build the bundled examples, verify them in the embedded tritonserver.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ] && "$PY" -c 'import sys; sys.exit(sys.version_info[:2] < (3, 13))'; then
  # NOTE: tritonbuild itself, the embedded server included, runs on 3.13 (ci/smoke-pythons.sh); the examples do not
  echo "ci/examples.sh: the examples export torch models, and for Python 3.13 the only torch is PyPI's CUDA build" \
       "(GBs; the CPU build on local disk is cp311). Run it on Python 3.10-3.12: PYTHON=python3.12 ci/examples.sh" >&2
  exit 2
fi
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q --no-compile --disable-pip-version-check -c ci/constraints.txt -e '.[test]'
unset VIRTUAL_ENV
# The embedded tritonserver's own environment (nvidia-pytriton, numpy < 2), beside .venv, not in it
PIP_CONSTRAINT="$PWD/ci/constraints.txt" .venv/bin/tritonbuild embedded install
.venv/bin/tritonbuild build recipes/examples -o model_repository
.venv/bin/tritonbuild verify model_repository
