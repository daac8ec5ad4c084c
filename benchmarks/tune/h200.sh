#!/usr/bin/env bash
# The H200 tune benchmark, run through the device tool from the repository root (benchmarks/tune/README.md).
#   h200.sh STEP...   STEP: setup-server | setup-client | {quick,brute}[-fixed][-relaxed][@RUN] | summary
#   @RUN names a repeat (quick-fixed@1 quick-fixed@2 quick-fixed@3: the same recipe tuned three times); summary
#   compares the picks of every report on the machine (benchmarks/tune/summarize.py: the same config, or
#   configs whose paired intervals overlap, said so).
#   setup-server: the server wheel (carry .whl/a, 53 MB); setup-client: numpy 1.26 (the Python stub's need), the
#   client wheels and this tree's tritonbuild (carry .whl/b, 41 MB). Both together exceed a call's 64 MiB, so
#   the first call is `setup-server` and the next, issued while the machine is warm (30 s), carries .whl/b:
#   `setup-client brute-fixed`. A step whose setup is already on the machine (/tmp lives while it is warm) skips
#   it, so `setup-server setup-client quick-fixed quick` is safe to repeat on a warm machine.
#   -fixed: gpu-mlp-fixed.yaml (max_batch_size 512) instead of gpu-mlp.yaml (64); -buckets: gpu-mlp-buckets.yaml
#   (a model that does not pad, built with batch_buckets [128], tuned with determinism: invariant);
#   -relaxed: --min-vs-default 0.85.
# The next session's run (tune you can trust: three repeats and the bucket model), one call per tune step while
# the machine stays warm (a quick run with paired rounds is estimated at 4-7 minutes on the H200: ~20 paired
# measurements of ~2 s per finalist, at most 4 finalists, no reloads; not yet measured):
#   h200.sh setup-server
#   h200.sh setup-client quick-fixed@1        (carry .whl/b)
#   h200.sh quick-fixed@2
#   h200.sh quick-fixed@3 summary
#   h200.sh quick-buckets
# Every tune step is bounded by the call's deadline (H200_BUDGET_S, default 575 s from the script's start; it is
# interrupted, exit 130, leaving its measurements so far in tune-measurements.jsonl). Each step's files come
# back as one archive, $OUT/STEP.tgz (the tool returns at most 8 files).
# Fails loudly: a failed goldens recording stops the script (exit 1, its JSON kept in $OUT); a tune step that
# exits non-zero (6: no config met the rules; 130: the deadline) is reported, the next steps still run, and the
# script exits with the first such code at the end.
set -euo pipefail
export PYTHONUNBUFFERED=1
W=${H200_WORK:-/tmp/tb}
deadline=$(( $(date +%s) + ${H200_BUDGET_S:-575} ))
here=$(pwd)
status=0
for step in "$@"; do
  echo "== $step at $(date -u +%H:%M:%S)"
  case $step in
    setup-server)
      if [ -f /tmp/pyt/.done ]; then echo "server wheel already installed"
      else
        python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/pyt .whl/a/*.whl
        touch /tmp/pyt/.done
      fi
      nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv ;;
    setup-client)
      if [ -f /tmp/site/.done ]; then echo "client wheels already installed"
      else
        python3 -m pip install -q --no-index --no-deps --no-cache-dir --upgrade .whl/b/numpy-*.whl
        python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site \
          $(ls .whl/b/*.whl | grep -v /numpy-)
        touch /tmp/site/.done
      fi
      mkdir -p /tmp/src && rm -rf /tmp/src/tritonbuild && cp -r builder /tmp/src/tritonbuild
      mkdir -p $W && cp benchmarks/tune/model.py benchmarks/tune/model_nopad.py benchmarks/tune/gpu-mlp*.yaml $W/ ;;
    quick|brute|quick-*|brute-*|quick@*|brute@*)
      export PYTHONPATH=/tmp/src:/tmp/site:/tmp/pyt
      recipe=gpu-mlp; case $step in *-fixed*) recipe=gpu-mlp-fixed ;; *-buckets*) recipe=gpu-mlp-buckets ;; esac
      cd $W
      if [ ! -f goldens/$recipe.npz ]; then  # goldens recorded on this GPU by Triton's default config, then built in
        python3 -m tritonbuild build $recipe.yaml -o OUT-$recipe
        if ! python3 -m tritonbuild verify OUT-$recipe --record --json > $OUT/record-$recipe.json; then
          echo "FAILED: verify --record of $recipe (report: record-$recipe.json); nothing to tune against" >&2
          exit 1
        fi
        python3 -m tritonbuild build $recipe.yaml -o OUT-$recipe --force
      fi
      flag=""; case $step in brute*) flag=--brute ;; esac
      case $step in *-relaxed*) flag="$flag --min-vs-default 0.85" ;; esac
      left=$(( deadline - $(date +%s) - 10 ))
      [ $left -gt 30 ] || { echo "$step: skipped, only $left s left in this call"; cd "$here"; continue; }
      start=$(date +%s); rm -rf $W/$step
      rc=0
      timeout --signal=INT --kill-after=15 $left python3 -m tritonbuild tune OUT-$recipe $recipe $flag \
        --processes 6 --report-dir $W/$step 2>&1 | tee $W/$step.log || rc=${PIPESTATUS[0]}
      if [ $rc -ne 0 ]; then
        echo "FAILED: $step: tune exited $rc (6: no config met the rules; 124/130: the deadline)" >&2
        [ $status -ne 0 ] || status=$rc
      fi
      echo "$step took $(( $(date +%s) - start )) s"
      mkdir -p $W/$step && cp $W/$step.log $W/$step/
      [ -f $W/$step/tritonserver.log ] && tail -c 200000 $W/$step/tritonserver.log > $W/$step/tritonserver-tail.log \
        && rm $W/$step/tritonserver.log
      tar czf $OUT/$step.tgz -C $W $step
      cd "$here" ;;
    summary)
      PYTHONPATH=/tmp/src:/tmp/site:/tmp/pyt python3 benchmarks/tune/summarize.py $W/*@*/tune-report.json \
        | tee $OUT/summary.txt ;;
    *) echo "unknown step $step" >&2; exit 2 ;;
  esac
done
exit $status
