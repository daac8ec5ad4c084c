#!/usr/bin/env bash
# The 8B-geometry determinism run (benchmarks/vllm/README.md, "8B run"): Llama-3-8B-shaped fp16 and INT4 W4A16
# models (random weights made on the GPU) served by real vLLM 0.22.0 in the embedded tritonserver, default vs
# invariant (serving.determinism: invariant: VLLM_BATCH_INVARIANT=1 + tritonbuild's W4A16 plugin), CUDA graphs on.
#   h200_8b.sh STEP...   from the repository root, after `h200.sh .gpu/partsN ... setup` (same /tmp/vw)
# Steps:
#   ckpt-8b          ckpt_8b.py: /tmp/vw/ckpt/llama-3-8b-fp16 (timed: results/ckpt-8b.json); the INT4 recipes
#                    quantize it in the build (vllm.quantize); CKPT_INT4=1 also writes ckpt_8b's own -int4 copy
#   build-8b         tritonbuild build: /tmp/vw/OUT8-default (the two default recipes), /tmp/vw/OUT8-invariant (the
#                    two invariant ones); the source checkpoints' weights are then removed (the repositories hold
#                    them; /tmp is 64 GiB). PLUGIN_PREINSTALL=1: also pip install the plugin wheel into python3
#   serve-8b CONFIG  CONFIG default|invariant|invariant-chunked: tritonbuild serve of that repository (both models
#                    in one server; invariant-chunked: the INT4 invariant model with a 512-token step budget,
#                    built with BUILD_CHUNKED=1; BUILD_DEFAULT=0 skips the default repository)
#   determinism-8b   measure.py determinism, each model: 10x alone, 10x amid 63 others
#   throughput-8b    measure.py throughput, each model: 1 and 64 streams
#   throughput-sampled-8b  the same with seeded top-p sampling (the top-k / top-p filter's cost)
#   verify-8b        tritonbuild verify --server --record --server-log --json on a hardlinked copy of the served
#                    repository (VERIFY_RECORD=0: compared with the recipes' goldens, not recorded)
#   soak-8b          measure.py soak, both models at once: 64 streams for SOAK_S (default 120) s each
#   fresh-goldens    the invariant models' committed goldens out of the way (a copy in bench8/goldens, and the
#                    invariant repository rebuilt without them): the next verify-8b records the answers, each later
#                    one compares with them (fresh compiles vs each other)
#   stop             stop the server
#   profile-8b CONFIG  (after stop: the GPU to itself) decode_profile.py on CONFIG's INT4 model (PROFILE_MODELS: other
#                    names), vLLM's offline engine under torch's profiler: a decode step's GPU time by kernel kind
# Each step is skipped when less than its need is left before H200_BUDGET_S (default 570 s) from the start.
# Results accumulate in /tmp/vw/results (while the machine stays warm); every call packs them all into
# $OUT/results-8b.tgz. Then: python3 benchmarks/vllm/summarize_8b.py results/ > docs/runs/DATE-llm-determinism-h200.json
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONIOENCODING=utf-8 LANG=C.UTF-8
W=/tmp/vw
SRC=${TRITONBUILD_SRC:-.}
OUT=${OUT:-$PWD/vllm-out}
R=$W/results
mkdir -p "$OUT" "$R" "$W/bench8"
here=$PWD
deadline=$(( $(date +%s) + ${H200_BUDGET_S:-570} ))
export PYTHONPATH=/tmp/src:/tmp/pyt
export VLLM_USE_FLASHINFER_SAMPLER=0
TB="python3 -m tritonbuild"
URL=http://127.0.0.1:8000
SOAK_S=${SOAK_S:-120}
# NOTE: the build cache on the same filesystem as the repositories, so materialised weights are hardlinks (64 GB disk)
export TRITONBUILD_CACHE_DIR=${TRITONBUILD_CACHE_DIR:-$W/cache}

config() { cat $W/config8 2>/dev/null || echo none; }
models() {  # the served config's models
  case $(config) in
    default) echo "llama-3-8b-fp16 llama-3-8b-int4" ;;
    invariant) echo "llama-3-8b-fp16-invariant llama-3-8b-int4-invariant" ;;
    invariant-chunked) echo "llama-3-8b-int4-invariant" ;;
  esac
}

serve() {  # $1: config
  rm -f /models && ln -sfn "$W/OUT8-$1" /models && echo "$1" > $W/config8
  if ! start_server "-8b-$1"; then
    echo "{\"config\": \"$1\", \"ready\": false}" > "$R/serve-8b-$1.json"; return 1
  fi
  echo "{\"config\": \"$1\", \"ready\": true, \"seconds\": $ready_s}" > "$R/serve-8b-$1.json"
  grep -h "Using .* for CompressedTensorsWNA16" "$W/server-8b-$1.log" | sort -u
}

# ckpt_8b.py's checkpoint (seeded: the same bytes each time) into $W/ckpt, its timing into $1
ckpt() {
  python3 "$SRC/benchmarks/vllm/ckpt_8b.py" $W/ckpt $([ "${CKPT_INT4:-0}" = 1 ] || echo --no-int4) > "$1"
}

# shellcheck source=server.sh
source "$(dirname "${BASH_SOURCE[0]}")/server.sh"

set -- "$@" ""
while [ $# -gt 1 ]; do
  step=$1; shift
  echo "== $step at $(date -u +%H:%M:%S), $(left) s left"
  t0=$(date +%s)
  case $step in
    ckpt-8b)
      need 150 ckpt-8b || continue
      ckpt $R/ckpt-8b.json || exit 4
      cat $R/ckpt-8b.json; df -h /tmp | tail -1 ;;
    build-8b)
      need 150 build-8b || continue
      rm -rf $W/bench8/*.yaml && cp "$SRC"/benchmarks/vllm/llama-3-8b-{fp16,int4}{,-invariant}.yaml $W/bench8/
      ln -sfn $W/ckpt $W/bench8/checkpoints
      # the invariant recipes' goldens, copied: a recipe's verify.goldens must resolve inside its folder
      rm -rf $W/bench8/goldens && cp -r "$SRC"/benchmarks/vllm/goldens $W/bench8/goldens
      # invariant-chunked: the INT4 invariant recipe with a 512-token step budget, so verify's chunked-prefill
      # path (a prompt longer than the budget amid decoding streams) fits max_model_len 2048
      mkdir -p $W/bench8/chunked && ln -sfn $W/ckpt $W/bench8/chunked/checkpoints
      rm -rf $W/bench8/chunked/goldens && cp -r $W/bench8/goldens $W/bench8/chunked/goldens
      sed 's/^  quantization: compressed-tensors$/&\n  extra: {max_num_batched_tokens: 512}/' \
        $W/bench8/llama-3-8b-int4-invariant.yaml > $W/bench8/chunked/llama-3-8b-int4-invariant.yaml
      (cd $W/bench8 && { [ "${BUILD_DEFAULT:-1}" = 0 ] ||
          $TB build llama-3-8b-fp16.yaml llama-3-8b-int4.yaml -o $W/OUT8-default; } &&
        $TB build llama-3-8b-fp16-invariant.yaml llama-3-8b-int4-invariant.yaml -o $W/OUT8-invariant &&
        { [ "${BUILD_CHUNKED:-0}" = 0 ] ||
          (cd chunked && $TB build llama-3-8b-int4-invariant.yaml -o $W/OUT8-invariant-chunked); }) || exit 4
      echo "{\"build_s\": $(( $(date +%s) - t0 )), \"quantize_threads\": \"${TRITONBUILD_QUANTIZE_THREADS:-auto}\"}" \
        > $R/build-8b.json
      # the repositories' file digests (the INT4 weights are quantized on this machine): two machines' runs can then
      # tell whether their answers came from the same files
      for c in default invariant; do
        [ -f $W/OUT8-$c/tritonbuild-manifest.json ] && cp $W/OUT8-$c/tritonbuild-manifest.json $R/manifest-8b-$c.json
      done
      rm -f $W/ckpt/*/*.safetensors  # NOTE: the repositories hold the weights (hardlinks into the build cache)
      if [ "${PLUGIN_PREINSTALL:-0}" = 1 ]; then
        python3 -m pip install -q --no-index --no-deps $W/OUT8-invariant/llama-3-8b-int4-invariant/1/plugins/*.whl
      fi
      du -sh $W/OUT8-default $W/OUT8-invariant; df -h /tmp | tail -1 ;;
    serve-8b)
      cfg=$1; shift
      case $cfg in default|invariant|invariant-chunked) ;;
        *) echo "serve-8b needs default|invariant|invariant-chunked, got '$cfg'" >&2; exit 2 ;; esac
      need 150 "serve-8b $cfg" || continue
      serve "$cfg" || { stop; continue; } ;;
    determinism-8b)
      need 60 determinism-8b || continue
      for m in $(models); do
        python3 $SRC/benchmarks/vllm/measure.py determinism $URL "$m" 10 63 >> $R/determinism-8b.jsonl ||
          echo "$m failed"
      done
      cut -c1-400 $R/determinism-8b.jsonl | tail -2 ;;
    throughput-8b)
      need 50 throughput-8b || continue
      for m in $(models); do
        python3 $SRC/benchmarks/vllm/measure.py throughput $URL "$m" 1,64 >> $R/throughput-8b.jsonl ||
          echo "$m failed"
      done
      tail -2 $R/throughput-8b.jsonl ;;
    throughput-sampled-8b)
      need 50 throughput-sampled-8b || continue
      for m in $(models); do
        python3 $SRC/benchmarks/vllm/measure.py throughput-sampled $URL "$m" 1,64 >> $R/throughput-sampled-8b.jsonl ||
          echo "$m failed"
      done
      tail -2 $R/throughput-sampled-8b.jsonl ;;
    verify-8b)
      need ${VERIFY_NEED_S:-180} verify-8b || continue
      cfg=$(config)
      rm -rf $W/OUT8-rec && cp -al $W/OUT8-$cfg $W/OUT8-rec  # hardlinks: --record writes goldens beside, not into
      # a report of an earlier verify-8b is kept under another name (invariance_speed.py reads them all)
      [ -f $R/verify-8b-$cfg.json ] && mv $R/verify-8b-$cfg.json $R/verify-8b-$cfg-$(date +%H%M%S).json
      # VERIFY_RECORD=0: compare with the recipes' goldens (recorded on another machine) instead of recording;
      # the server's log proves which kernels serve the invariant models (verify --server-log)
      (cd $W/bench8 && $TB verify $W/OUT8-rec --server $URL $([ "${VERIFY_RECORD:-1}" = 0 ] || echo --record) \
        --server-log $W/server-8b-$cfg.log --json > $R/verify-8b-$cfg.json)
      echo "verify exit $?"
      g=$R/goldens/$(date +%H%M%S) && mkdir -p $g && cp $W/bench8/goldens/*.npz $g/  # what --record wrote, per start
      # after fresh-goldens: the repository as --record left it (goldens and manifest) is the next start's
      if [ -f $W/keep-goldens ]; then rm -rf $W/OUT8-$cfg && mv $W/OUT8-rec $W/OUT8-$cfg; fi
      python3 - "$R/verify-8b-$cfg.json" <<'PY'
import json, sys
for m in json.load(open(sys.argv[1])).get("models", []):
    print(m["name"], "passed" if m["passed"] else "FAILED", m["batch_invariance"], m.get("batch_detail", ""),
          m.get("cause"), m.get("served_problems"), [x.get("context") for x in m.get("mismatches", [])][:6])
PY
      ;;
    soak-8b)
      need $(( SOAK_S + 40 )) soak-8b || continue
      pids=""
      for m in $(models); do
        python3 $SRC/benchmarks/vllm/measure.py soak $URL "$m" "$SOAK_S" 64 > "$W/soak-$m.json" & pids="$pids $!"
      done
      wait $pids
      for m in $(models); do cat "$W/soak-$m.json" >> $R/soak-8b.jsonl; done
      tail -2 $R/soak-8b.jsonl ;;
    fresh-goldens)
      # the committed goldens out of the recipes' folder, and the invariant repository rebuilt without them (the
      # build had copied them into its version directories: a verify then compared with them, not with the first
      # start, 2026-12-07); keep-goldens: each verify-8b leaves its --record'ed repository as the one served next
      need 60 fresh-goldens || continue
      # build-8b removed the source checkpoint's weights, which the build hashes again: ckpt_8b.py makes the same
      # bytes (seeded; the build then finds its steps cached, 2026-12-07)
      if ! ls $W/ckpt/llama-3-8b-fp16/*.safetensors >/dev/null 2>&1; then
        ckpt $R/ckpt-8b-again.json || exit 4
      fi
      rm -f $W/bench8/goldens/llama-3-8b-*-invariant.*npz* && ls $W/bench8/goldens
      (cd $W/bench8 && $TB build llama-3-8b-fp16-invariant.yaml llama-3-8b-int4-invariant.yaml \
        -o $W/OUT8-invariant 2>&1 | tail -3) || exit 4
      touch $W/keep-goldens ;;
    stop) stop ;;
    profile-8b)
      cfg=$1; shift
      need 120 "profile-8b $cfg" || continue
      rm -f /models && ln -sfn "$W/OUT8-$cfg" /models  # model.json names the weights under /models
      for m in ${PROFILE_MODELS:-llama-3-8b-int4$([ "$cfg" = default ] || echo -invariant)}; do
        python3 $SRC/benchmarks/vllm/decode_profile.py "$W/OUT8-$cfg/$m" --streams 1,64 --tokens 64 \
          $([ "$cfg" = default ] || echo --invariant) --out "$R/profile-8b-$m.json" 2>&1 | tail -4 ||
          echo "$m profile failed"
      done ;;
    *) echo "unknown step $step" >&2; exit 2 ;;
  esac
  echo "$step took $(( $(date +%s) - t0 )) s"
done
for c in default invariant invariant-chunked; do
  f=$W/server-8b-$c.log
  [ -f $f ] || continue
  grep -h "Using .* for CompressedTensorsWNA16\|KV cache\|[Mm]odel loading took\|Graph capturing finished\|tritonbuild_invariant" $f |
    cut -c1-400 > $R/server-8b-$c.lines
  tail -c 300000 $f > $R/server-8b-$c.log
done
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > $R/gpu.txt 2>/dev/null
python3 -c "import importlib.metadata as m; print(m.version('vllm'))" > $R/vllm-version.txt 2>/dev/null
cd "$here"
tar czf $OUT/results-8b.tgz -C $W results 2>/dev/null
ls $R
