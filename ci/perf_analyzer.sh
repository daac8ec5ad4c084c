#!/usr/bin/env bash
# perf_analyzer for the test that runs it against the embedded tritonserver with `export perf-data` output
# (tests/contracts/test_perf_analyzer_data.py; it skips without one). PyPI's `perf-analyzer` package holds no
# binary; tritonclient's manylinux wheels up to 2.51 ship one (the embedded server's release), which links
# libb64.so.0d (nvidia-pytriton's wheel carries it: in the embedded server's environment, `tritonbuild embedded
# show`) and libcudart.so.12. Unpacked into
# .tritonbuild-perf-analyzer/ (ignored by git), with a wrapper that finds those libraries; prints its path.
# The versions are a tool's, not dependencies of tritonbuild: they live here, not in ci/constraints.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
DEST=.tritonbuild-perf-analyzer
TRITONCLIENT=2.51.0
CUDART=12.9.79
if [ ! -x "$DEST/perf_analyzer" ]; then
  mkdir -p "$DEST/wheels" "$DEST/lib"
  .venv/bin/python -m pip download -q --disable-pip-version-check --no-deps --only-binary=:all: \
    --platform manylinux1_x86_64 --platform manylinux2014_x86_64 -d "$DEST/wheels" \
    "tritonclient==$TRITONCLIENT" "nvidia-cuda-runtime-cu12==$CUDART"
  .venv/bin/python - "$DEST" <<'PY'
import sys, zipfile
from pathlib import Path
dest = Path(sys.argv[1])
for wheel in (dest / "wheels").glob("*.whl"):
    with zipfile.ZipFile(wheel) as z:
        for name in z.namelist():
            if name.endswith("/bin/perf_analyzer") or name.endswith("/lib/libcudart.so.12"):
                target = dest / ("bin" if name.endswith("perf_analyzer") else "lib") / Path(name).name
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(z.read(name))
                target.chmod(0o755)
PY
  server_env=$(.venv/bin/tritonbuild embedded show --json | .venv/bin/python -c "import json, sys; print(json.load(sys.stdin)['path'] or '.venv')")
  libb64=$(ls "$server_env"/lib/python3*/site-packages/nvidia_pytriton.libs/libb64-*.so.0d | head -1)
  ln -sf "$(realpath "$libb64")" "$DEST/lib/libb64.so.0d"
  cat > "$DEST/perf_analyzer" <<SH
#!/usr/bin/env bash
here=\$(cd "\$(dirname "\$0")" && pwd)
LD_LIBRARY_PATH="\$here/lib\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}" exec "\$here/bin/perf_analyzer" "\$@"
SH
  chmod +x "$DEST/perf_analyzer"
fi
"$DEST/perf_analyzer" --version >/dev/null
realpath "$DEST/perf_analyzer"
