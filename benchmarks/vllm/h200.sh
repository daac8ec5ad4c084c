#!/usr/bin/env bash
# The vLLM benchmark on a GPU machine (benchmarks/vllm/README.md): real vLLM inside the embedded tritonserver,
# the fp16 and INT4 repositories built and verified by tritonbuild, then determinism, memory plan, throughput.
#   h200.sh STEP...   run from the repository root; each step's output goes to $OUT (default ./vllm-out)
# Steps, in order:
#   DIR          (a directory) copy its files (wheel parts) to /tmp/vw/parts: a call carries at most 64 MiB, so
#                the wheels arrive over several calls while the machine stays up, and setup rejoins them
#   setup        rejoin + unpack the trimmed vLLM, pip install --no-deps --target /tmp/site the other wheels
#                (/tmp/pyt for nvidia-pytriton), tritonbuild from $TRITONBUILD_SRC (default .gpu/src), the vLLM
#                backend from $VLLM_BACKEND_SRC (upstream's src/ of branch r26.01; one import patched for 0.22)
#   build        the checkpoints (tiny_llama.py), tritonbuild plan + build of both recipes, /models -> the repository
#   serve[-bi]   tritonbuild serve --backend vllm=... (-bi: with VLLM_BATCH_INVARIANT=1), until both are loaded
#   verify       verify --server --record on a copy, rebuild with the goldens, verify --server (must pass)
#   determinism[-bi] | throughput    measure.py against both models
#   stop         stop the server
#   memory-8b    vLLM alone on Llama-3-8B's geometry with load_format=dummy (random weights): its KV blocks
# Every step is skipped when less than its need is left before H200_BUDGET_S (default 570 s) from the start.
set -uo pipefail
export PYTHONUNBUFFERED=1
W=${H200_WORK:-/tmp/vw}  # scratch: the wheel parts, the repositories, results/
SRC=${TRITONBUILD_SRC:-.gpu/src}                      # this repository's tree (a copy, or the clone itself: .)
BACKEND_SRC=${VLLM_BACKEND_SRC:-.gpu/vllm_backend/src}  # vllm_backend's src/ (model.py, utils/), branch r26.01
OUT=${OUT:-$PWD/vllm-out}
R=$W/results  # everything measured; packed into $R/results.tgz at the end (the tool returns at most 8 files)
mkdir -p "$W/parts" "$OUT" "$R" /tmp/site
here=$PWD
deadline=$(( $(date +%s) + ${H200_BUDGET_S:-570} ))
export PYTHONPATH=/tmp/src:/tmp/pyt
# FlashInfer is not carried (vLLM pins flashinfer-python 0.6.11 + cubins, hundreds of MB): its sampler is on by
# default and imports it unguarded; the PyTorch sampler is what greedy decoding needs
export VLLM_USE_FLASHINFER_SAMPLER=0
SITE=$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
TB="python3 -m tritonbuild"
URL=http://127.0.0.1:8000
MODELS="tiny-llama-fp16 tiny-llama-int4"
RECIPES="tiny-llama-fp16.yaml tiny-llama-int4.yaml"
REPO=$W/OUT
export PYTHONIOENCODING=utf-8 LANG=C.UTF-8  # NOTE: vLLM's engine process logs non-ASCII text



# shellcheck source=server.sh
source "$(dirname "${BASH_SOURCE[0]}")/server.sh"

for step in "$@"; do
  echo "== $step at $(date -u +%H:%M:%S), $(left) s left"
  t0=$(date +%s)
  case $step in
    setup)
      if [ ! -f /tmp/site/.done ] && ls $W/parts/vllm-trim.part-* >/dev/null 2>&1; then  # else: installed already
        # NOTE: into python3's own site-packages: the Python-backend stub that runs the vLLM backend sees those
        # (as it sees torch there), not packages under PYTHONPATH (seen on the H200: vllm not found)
        cat $W/parts/vllm-trim.part-* | tar -xz -C "$SITE" || exit 3
        python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/pyt \
          $W/parts/nvidia_pytriton-*.whl || exit 3
        python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
          $(ls $W/parts/*.whl | grep -v nvidia_pytriton) || exit 3
        touch /tmp/site/.done
      fi
      rm -rf /tmp/src /tmp/vllm_backend && mkdir -p /tmp/src
      cp -r $SRC/builder /tmp/src/tritonbuild && cp -r $BACKEND_SRC /tmp/vllm_backend
      # vLLM 0.22 moved TokensPrompt out of vllm.inputs.data (r26.01's utils/request.py imports it from there)
      sed -i 's/^from vllm.inputs.data import TokensPrompt/from vllm.inputs import TokensPrompt/' \
        /tmp/vllm_backend/utils/request.py
      python3 -c "import vllm, numpy, torch, transformers, tritonclient; print('vllm', vllm.__version__, 'numpy',
        numpy.__version__, 'torch', torch.__version__, 'transformers', transformers.__version__)" || exit 3
      nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
      python3 -m pip list 2>/dev/null | tail -n +3 > $R/installed.txt ;;
    build)
      rm -rf $W/bench && mkdir -p $W/bench && cp $SRC/benchmarks/vllm/*.yaml $W/bench/
      (cd $SRC && python3 benchmarks/vllm/tiny_llama.py $W/bench/checkpoints) || exit 4
      (cd $W/bench && $TB plan tiny-llama-fp16.yaml tiny-llama-int4.yaml llama-3-8b.yaml --json > $R/plan.json \
        && $TB build tiny-llama-fp16.yaml tiny-llama-int4.yaml -o $W/OUT) || exit 4
      ln -sfn $W/OUT /models ;;
    serve)
      need 150 serve || continue
      if ! start_server ""; then  # NOTE: then the fp16 model alone, so that one failure leaves the other checks
        stop; echo "retrying with tiny-llama-fp16 alone"
        MODELS=tiny-llama-fp16 RECIPES=tiny-llama-fp16.yaml REPO=$W/OUT-fp16
        (cd $W/bench && $TB build $RECIPES -o $REPO >/dev/null) && ln -sfn $REPO /models && start_server -fp16
      fi ;;
    serve-bi) need 150 serve-bi && VLLM_BATCH_INVARIANT=1 start_server -bi ;;
    verify)
      need 60 verify || continue
      rm -rf $W/OUT-rec && cp -r $REPO $W/OUT-rec
      (cd $W/bench && $TB verify $W/OUT-rec --server $URL --record --json > $R/verify-record.json)
      echo "record exit $?"
      (cd $W/bench && $TB build $RECIPES -o $W/OUT2 >/dev/null &&
        $TB verify $W/OUT2 --server $URL --json > $R/verify.json)
      echo "verify exit $?"
      cp $W/bench/goldens/*.npz $R/ 2>/dev/null ;;
    determinism|determinism-bi|throughput)
      need 45 "$step" || continue
      kind=${step%-bi}
      for m in $MODELS; do
        python3 $SRC/benchmarks/vllm/measure.py "$kind" $URL "$m" >> "$R/$step.jsonl" || echo "$m failed"
      done
      cut -c1-700 "$R/$step.jsonl" | tail -4 ;;
    stop) stop ;;
    memory-8b)
      need 120 memory-8b || continue
      python3 - "$W/bench/checkpoints/llama-3-8b" > $W/llama-3-8b.log 2>&1 <<'PY'
import sys
from vllm.engine.arg_utils import EngineArgs
from vllm.v1.engine.llm_engine import LLMEngine
LLMEngine.from_engine_args(EngineArgs(model=sys.argv[1], load_format="dummy", dtype="bfloat16", seed=0,
                                      gpu_memory_utilization=0.9, max_model_len=8192, enforce_eager=True,
                                      block_size=16))
PY
      echo "engine exit $?"
      python3 $SRC/benchmarks/vllm/measure.py kv-log $W/llama-3-8b.log > $R/memory-8b.json
      cat $R/memory-8b.json ;;
    *) [ -d "$step" ] && { cp "$step"/* $W/parts/ && echo "stashed $(ls $W/parts | wc -l) files"; } ||
         { echo "unknown step $step" >&2; exit 2; } ;;
  esac
  echo "$step took $(( $(date +%s) - t0 )) s"
done
for f in $W/server.log $W/server-fp16.log $W/server-bi.log $W/llama-3-8b.log; do [ -f $f ] && tail -c 400000 $f > $R/$(basename $f); done
for f in $W/server.log $W/server-fp16.log $W/server-bi.log; do
  [ -f $f ] && python3 $SRC/benchmarks/vllm/measure.py kv-log $f > $R/kv-$(basename $f .log).json
done
cd "$here"
tar czf $OUT/results.tgz -C $W results 2>/dev/null
ls $R
