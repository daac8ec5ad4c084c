#!/usr/bin/env bash
# The two-GPU run (benchmarks/multi_gpu/README.md, issue 34) on nvidia-h200-x2, after benchmarks/vllm/h200.sh's
# parts and `setup` (same /tmp/vw): vLLM tensor parallel 2 at Llama-3-8B geometry in the embedded tritonserver, its
# tensor-parallel-1 twin on one GPU for comparison, and a Python-backend model with instances on GPU 0 and GPU 1.
#   h200x2.sh STEP...   from the repository root
# Steps:
#   ckpt          ../vllm/ckpt_8b.py --no-int4: /tmp/vw/ckpt/llama-3-8b-fp16 (the INT4 recipes quantize it)
#   build         tritonbuild plan --json + build: /tmp/vw/OUT-tp2 (fp16 + INT4, tp 2, invariant), /tmp/vw/OUT-tp1
#                 (the same on one GPU: ../vllm/llama-3-8b-*-invariant.yaml), /tmp/vw/OUT-scorer (gpu-scorer.yaml)
#   serve CONFIG  CONFIG tp2|tp1|scorer: tritonbuild serve of that repository
#   verify        tritonbuild verify --server --record --json on a hardlinked copy of the served repository
#   determinism   ../vllm/measure.py determinism, each LLM: 10x alone, 10x amid 63 others
#   throughput    ../vllm/measure.py throughput, each LLM: 1 and 64 streams
#   scorer-load   scorer_load.py for LOAD_S (default 120) s at 64 streams while nvidia-smi samples both GPUs;
#                 then each instance's row count (SCORER_COUNTS_DIR) and the GPU processes
#   stop          stop the server
# Each step is skipped when less than its need is left before H200_BUDGET_S (default 570 s) from the start.
# Every call packs /tmp/vw/results-mg into $OUT/results-mg.tgz; then
#   python3 benchmarks/multi_gpu/summarize_mg.py RESULTS > docs/runs/DATE-multi-gpu-h200x2.json
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONIOENCODING=utf-8 LANG=C.UTF-8
# NOTE: NVLink multicast stays off (the device notes: a program using it can take the host's GPUs out of service)
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
W=/tmp/vw
SRC=${TRITONBUILD_SRC:-.}
OUT=${OUT:-$PWD/vllm-out}
R=$W/results-mg
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
mkdir -p "$OUT" "$R" "$W/mg"
deadline=$(( $(date +%s) + ${H200_BUDGET_S:-570} ))
export PYTHONPATH=/tmp/src:/tmp/pyt VLLM_USE_FLASHINFER_SAMPLER=0
export TRITONBUILD_CACHE_DIR=${TRITONBUILD_CACHE_DIR:-$W/cache}
export SCORER_COUNTS_DIR=$W/scorer-counts
TB="python3 -m tritonbuild"
URL=http://127.0.0.1:8000
LOAD_S=${LOAD_S:-120}

config() { cat $W/config-mg 2>/dev/null || echo none; }
llms() {
  case $(config) in
    tp2) echo "llama-3-8b-fp16-tp2-invariant llama-3-8b-int4-tp2-invariant" ;;
    tp1) echo "llama-3-8b-fp16-invariant llama-3-8b-int4-invariant" ;;
  esac
}

# shellcheck source=../vllm/server.sh
source "$HERE/../vllm/server.sh"

build() {
  rm -rf $W/mg && mkdir -p $W/mg && cp "$HERE"/*.yaml "$HERE"/../vllm/llama-3-8b-{fp16,int4}-invariant.yaml $W/mg/
  cp -r "$HERE/gpu_scorer" $W/mg/ && ln -sfn $W/ckpt $W/mg/checkpoints
  cd $W/mg || return 1
  local tp2="llama-3-8b-fp16-tp2-invariant.yaml llama-3-8b-int4-tp2-invariant.yaml"
  local tp1="llama-3-8b-fp16-invariant.yaml llama-3-8b-int4-invariant.yaml"
  $TB plan $tp2 --json > $R/plan-tp2.json && $TB plan $tp1 --json > $R/plan-tp1.json &&
    $TB build $tp2 -o $W/OUT-tp2 && $TB build $tp1 -o $W/OUT-tp1 && $TB build gpu-scorer.yaml -o $W/OUT-scorer
}

set -- "$@" ""
while [ $# -gt 1 ]; do
  step=$1; shift
  echo "== $step at $(date -u +%H:%M:%S), $(left) s left"
  t0=$(date +%s)
  case $step in
    ckpt)
      need 120 ckpt || continue
      python3 "$SRC/benchmarks/vllm/ckpt_8b.py" $W/ckpt --no-int4 > $R/ckpt.json || exit 4 ;;
    build)
      need 200 build || continue
      (build) || exit 4
      rm -f $W/ckpt/*/*.safetensors  # NOTE: the repositories hold the weights (hardlinks into the build cache)
      python3 -m pip install -q --no-index --no-deps $W/OUT-tp2/llama-3-8b-int4-tp2-invariant/1/plugins/*.whl
      echo "{\"build_s\": $(( $(date +%s) - t0 ))}" > $R/build.json ;;
    serve)
      cfg=$1; shift
      case $cfg in tp2|tp1|scorer) ;; *) echo "serve needs tp2|tp1|scorer, got '$cfg'" >&2; exit 2 ;; esac
      need 150 "serve $cfg" || continue
      rm -rf /models "$SCORER_COUNTS_DIR" && mkdir -p "$SCORER_COUNTS_DIR" && ln -sfn "$W/OUT-$cfg" /models
      echo "$cfg" > $W/config-mg
      if start_server "-mg-$cfg"; then
        echo "{\"config\": \"$cfg\", \"ready\": true, \"seconds\": $ready_s}" > "$R/serve-$cfg.json"
      else
        echo "{\"config\": \"$cfg\", \"ready\": false}" > "$R/serve-$cfg.json"; stop
      fi ;;
    verify)
      need 60 verify || continue
      cfg=$(config)
      rm -rf $W/OUT-rec && cp -al $W/OUT-$cfg $W/OUT-rec
      (cd $W/mg && $TB verify $W/OUT-rec --server $URL --record --json > $R/verify-$cfg.json)
      echo "verify exit $?" ;;
    determinism)
      need 60 determinism || continue
      for m in $(llms); do
        python3 $SRC/benchmarks/vllm/measure.py determinism $URL "$m" 10 63 >> $R/determinism.jsonl || echo "$m failed"
      done ;;
    throughput)
      need 50 throughput || continue
      for m in $(llms); do
        python3 $SRC/benchmarks/vllm/measure.py throughput $URL "$m" 1,64 >> $R/throughput.jsonl || echo "$m failed"
      done ;;
    scorer-load)
      need $(( LOAD_S + 30 )) scorer-load || continue
      nvidia-smi --query-gpu=index,utilization.gpu,memory.used --format=csv,noheader,nounits -lms 500 \
        > $R/scorer-gpu-samples.csv & sampler=$!
      python3 "$HERE/scorer_load.py" $URL gpu-scorer "$LOAD_S" 64 > $R/scorer-load.json || echo "load failed"
      kill $sampler
      python3 -c "import glob, json, sys; json.dump([json.load(open(f)) for f in sorted(glob.glob(sys.argv[1] + '/*.json'))], sys.stdout)" \
        "$SCORER_COUNTS_DIR" > $R/scorer-counts.json
      nvidia-smi --query-gpu=index,uuid --format=csv,noheader > $R/gpu-uuids.csv
      nvidia-smi --query-compute-apps=gpu_uuid,pid,used_memory --format=csv,noheader,nounits > $R/scorer-gpu-apps.csv
      cat $R/scorer-load.json $R/scorer-counts.json ;;
    stop) stop ;;
    *) echo "unknown step $step" >&2; exit 2 ;;
  esac
  echo "$step took $(( $(date +%s) - t0 )) s"
done
for f in $W/server-mg-*.log; do
  [ -f "$f" ] || continue
  grep -h "Using .* for CompressedTensorsWNA16\|GPU KV cache size\|[Mm]odel loading took\|tensor_parallel\|world_size" "$f" |
    cut -c1-400 > "$R/$(basename "$f" .log).lines"
done
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > $R/gpu.txt 2>/dev/null
python3 -c "import importlib.metadata as m; print(m.version('vllm'))" > $R/vllm-version.txt 2>/dev/null
tar czf $OUT/results-mg.tgz -C $W results-mg 2>/dev/null
ls $R
