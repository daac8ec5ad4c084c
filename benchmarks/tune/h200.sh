#!/usr/bin/env bash
# On the lent H200 (device tool), from the repository root. Call 1 (carry .whl/a): `h200.sh setup-server`;
# call 2 while warm (carry .whl/b): `h200.sh setup-client quick`; call 3 while warm: `h200.sh brute`.
# `quick-relaxed` / `brute-relaxed`: the same with --min-vs-default 0.85 (a 15 % low-load loss allowed).
# Results go to $OUT (the tool brings them back); the work directory /tmp/tb lives while the machine is warm.
set -euo pipefail
export PYTHONUNBUFFERED=1
W=/tmp/tb
for step in "$@"; do
  case $step in
    setup-server)
      python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/pyt .whl/a/*.whl
      nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv ;;
    setup-client)
      python3 -m pip install -q --no-index --no-deps --no-cache-dir --upgrade .whl/b/numpy-*.whl
      python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site \
        $(ls .whl/b/*.whl | grep -v /numpy-)
      mkdir -p /tmp/src && rm -rf /tmp/src/tritonbuild && cp -r builder /tmp/src/tritonbuild
      rm -rf $W && mkdir -p $W && cp benchmarks/tune/model.py benchmarks/tune/gpu-mlp.yaml $W/ ;;
    quick|brute|quick-*|brute-*)
      export PYTHONPATH=/tmp/src:/tmp/site:/tmp/pyt
      cd $W
      if [ ! -f OUT/gpu-mlp/golden-v1.npz ]; then
        python3 -m tritonbuild build gpu-mlp.yaml -o OUT
        python3 -m tritonbuild verify OUT --record --json > $OUT/record.json || true
        python3 -m tritonbuild build gpu-mlp.yaml -o OUT --force
      fi
      flag=""; case $step in brute*) flag=--brute ;; esac
      case $step in *-relaxed) flag="$flag --min-vs-default 0.85" ;; esac
      start=$(date +%s)
      python3 -m tritonbuild tune OUT gpu-mlp $flag --processes 6 --report-dir $W/$step 2>&1 | tee $W/$step.log \
        || echo "tune exited $?"
      echo "$step took $(( $(date +%s) - start )) s"
      cp $W/$step/tune-report.json $OUT/$step-report.json || true
      cp $W/$step/tune-plot.png $OUT/$step-plot.png || true
      cp $W/$step/tune-patch.yaml $OUT/$step-patch.yaml || true
      cd - > /dev/null ;;
  esac
done
