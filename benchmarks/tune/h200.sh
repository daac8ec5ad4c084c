#!/usr/bin/env bash
# The H200 tune benchmark, run through the device tool from the repository root (benchmarks/tune/README.md).
#   h200.sh STEP...   STEP: setup-server | setup-client | {quick,brute}[-fixed|-buckets][-relaxed][@RUN] |
#                     soak-buckets | summary
#   @RUN names a repeat (quick-fixed@1 quick-fixed@2 quick-fixed@3: the same recipe tuned three times); summary
#   compares the picks of every repeat on the machine (benchmarks/tune/summarize.py: the same config, or
#   configs whose paired intervals overlap, said so; exit 1 otherwise).
#   -fixed: gpu-mlp-fixed.yaml (max_batch_size 512) instead of gpu-mlp.yaml (64); -buckets: gpu-mlp-buckets.yaml
#   (a model that does not pad, built with batch_buckets [128], tuned with determinism: invariant: bucket sizes
#   16..128 searched with the batch sizes, Triton's default serving the model as built; -plain: --baseline plain,
#   the default serving it without its padding);
#   -relaxed: --min-vs-default 0.85; -paired (quick-buckets-paired): the bucket recipe's grid cut to 1 and 4
#   instances x batches of 128 x no delay and --min-vs-default 0.3, so that both reach paired rounds and their
#   intervals are measured at every load (the 1.0 rule screens them out at 1 client first). soak-buckets: quick-buckets' chosen config alone in a fresh server at 64
#   clients until >= 100k answers (H200_SOAK_ANSWERS) came back, each compared bit for bit with its answer alone
#   (benchmarks/tune/soak.py).
#   setup-server: the server wheel (carry .whl/a, 53 MiB); setup-client: numpy 1.26 (the Python stub's need), the
#   client wheels and this tree's tritonbuild (carry .whl/b, 34 MiB). Both together exceed a call's 64 MiB, so
#   the first call is `setup-server` and the next, issued while the machine is warm (30 s), carries .whl/b.
#   A setup already on the machine (/tmp lives while it is warm) is skipped, and so is a tune step whose report
#   is already there, so one list of steps can be given to every call: each call runs what is left.
# Time: every tune step is bounded by the call's deadline (H200_BUDGET_S, default 575 s from the script's start;
# it is interrupted, exit 130, leaving its measurements so far in tune-measurements.jsonl). A tune step starts
# only when the time left is at least the longest tune step of this call so far, or H200_STEP_S (default 0)
# before the first: otherwise it is skipped (listed at the end as SKIPPED) for the next call.
#   H200_TUNE_ARGS: extra flags for every tune step (e.g. --rounds 4). H200_WORK: the work folder (/tmp/tb).
#   H200_PYTHONPATH: where tritonbuild and the wheels are (default the setup steps' /tmp/src:/tmp/site:/tmp/pyt;
#   a dry run on CPU points it elsewhere).
# Each tune step's files come back as one archive, $OUT/STEP.tgz with @ spelled -run (the tool returns at most
# 8 files, named in letters, digits, '.', '_' and '-').
# Fails loudly: a failed goldens recording stops the script (exit 1, its JSON kept in $OUT); a tune step that
# exits non-zero (6: no config met the rules; 130: the deadline), a soak with a differing answer and a summary
# that disagrees are reported, the next steps still run, and the script exits with the first such code; with
# none, 75 when a step was skipped for time (run the same list again), else 0.
set -euo pipefail
export PYTHONUNBUFFERED=1
W=${H200_WORK:-/tmp/tb}
deadline=$(( $(date +%s) + ${H200_BUDGET_S:-575} ))
here=$(pwd)
status=0
pypath=${H200_PYTHONPATH:-/tmp/src:/tmp/site:/tmp/pyt}
longest=0  # the longest tune step of this call: a later one starts only when that much time is left
skipped=""
recipe_of() {  # the recipe a step tunes
  case $1 in *-fixed*) echo gpu-mlp-fixed ;; *-buckets*) echo gpu-mlp-buckets ;; *) echo gpu-mlp ;; esac
}
archive_of() {  # the device tool returns only files named in letters, digits, '.', '_' and '-': @ becomes -run
  echo "${1//@/-run}"
}
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
      export PYTHONPATH=$pypath
      recipe=$(recipe_of $step)
      if [ -f $W/$step/tune-report.json ]; then echo "$step: already done on this machine"; continue; fi
      left=$(( deadline - $(date +%s) - 10 ))
      need=$(( longest > ${H200_STEP_S:-0} ? longest : ${H200_STEP_S:-0} ))
      if [ $left -lt 30 ] || [ $left -lt $need ]; then
        echo "$step: skipped, $left s left in this call and a tune step needs ~$need s: run it in the next call"
        skipped="$skipped $step"; continue
      fi
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
      case $step in *-plain*) flag="$flag --baseline plain" ;; esac
      case $step in *-paired*)  # the finalists' intervals at every load, whatever the 1-client rule decides
        sed -e 's/instance_counts: \[1, 2, 4\]/instance_counts: [1, 4]/' -e 's/max_queue_delay_us: \[0, 500\]/max_queue_delay_us: [0]/' \
          -e 's/batch_sizes: \[16, 32, 64, 128\]/batch_sizes: [128]/' -e 's/buckets: \[16, 32, 64, 128\]/buckets: [128]/' \
          $recipe.yaml > $recipe-paired.yaml
        flag="$flag --recipe $recipe-paired.yaml --min-vs-default 0.3" ;;
      esac
      left=$(( deadline - $(date +%s) - 10 ))
      start=$(date +%s); rm -rf $W/$step
      rc=0
      timeout --signal=INT --kill-after=15 $left python3 -m tritonbuild tune OUT-$recipe $recipe $flag \
        ${H200_TUNE_ARGS:-} --processes 6 --report-dir $W/$step 2>&1 | tee $W/$step.log || rc=${PIPESTATUS[0]}
      if [ $rc -ne 0 ]; then
        echo "FAILED: $step: tune exited $rc (6: no config met the rules; 124/130: the deadline)" >&2
        [ $status -ne 0 ] || status=$rc
      fi
      took=$(( $(date +%s) - start )); echo "$step took $took s"; [ $took -le $longest ] || longest=$took
      mkdir -p $W/$step && cp $W/$step.log $W/$step/
      if [ -f $W/$step/tritonserver.log ]; then
        tail -c 200000 $W/$step/tritonserver.log > $W/$step/tritonserver-tail.log && rm $W/$step/tritonserver.log
      fi
      if [ $rc -ne 0 ] && [ ! -f $W/$step/tune-report.json ]; then rm -rf $W/$step.failed; mv $W/$step $W/$step.failed; fi
      tar czf $OUT/$(archive_of $step).tgz -C $W $( [ -d $W/$step ] && echo $step || echo $step.failed )
      cd "$here" ;;
    soak-*)  # soak-buckets: quick-buckets' chosen config (soak.py says which) alone at 64 clients, >= 100k answers
      export PYTHONPATH=$pypath
      src=quick-${step#soak-}; recipe=$(recipe_of $src)
      if [ -f $W/$step.json ]; then echo "$step: already done on this machine"; continue; fi
      left=$(( deadline - $(date +%s) - 10 ))
      if [ ! -f $W/$src/tune-report.json ] || [ $left -lt 60 ]; then
        echo "$step: skipped ($src has no report on this machine, or only $left s left)"; skipped="$skipped $step"
        continue
      fi
      rc=0
      (cd $W && timeout --signal=INT --kill-after=15 $left python3 "$here/benchmarks/tune/soak.py" OUT-$recipe \
        $recipe $src/tune-report.json --answers ${H200_SOAK_ANSWERS:-100000} --processes 6 --max-s $(( left - 40 )) \
        --log $W/$step-tritonserver.log) > $OUT/$(archive_of $step).json || rc=$?
      cat $OUT/$(archive_of $step).json
      [ $rc -ne 0 ] || cp $OUT/$(archive_of $step).json $W/$step.json
      if [ $rc -ne 0 ]; then
        echo "FAILED: $step exited $rc (1: an answer differed or failed, or too few answers)" >&2
        [ $status -ne 0 ] || status=$rc
        [ ! -f $W/$step-tritonserver.log ] || tail -c 100000 $W/$step-tritonserver.log > $OUT/$(archive_of $step)-server-tail.log
      fi ;;
    summary)
      PYTHONPATH=$pypath python3 benchmarks/tune/summarize.py $W/*@*/tune-report.json | tee $OUT/summary.txt \
        || { echo "FAILED: summary: the repeats' picks disagree outside their intervals" >&2; [ $status -ne 0 ] || status=1; } ;;
    *) echo "unknown step $step" >&2; exit 2 ;;
  esac
done
if [ -n "$skipped" ]; then
  echo "SKIPPED (not run in this call, give them to the next):$skipped" >&2
  [ $status -ne 0 ] || status=75
fi
exit $status
