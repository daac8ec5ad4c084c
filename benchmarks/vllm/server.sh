# Sourced by h200.sh, h200_8b.sh and ../multi_gpu/h200x2.sh (W: their work directory; TB and deadline: theirs).
left() { echo $(( deadline - $(date +%s) )); }  # seconds to the caller's deadline
need() { [ "$(left)" -gt "$1" ] || { echo "skipped: $2 needs $1 s, $(left) s left"; return 1; }; }
start_server() {  # $1: log name; tritonbuild serve /models with the vLLM backend, until ready (0) or not (1)
  setsid $TB serve /models --backend vllm=/tmp/vllm_backend --http-port 8000 --grpc-port 8001 \
    --metrics-port 8002 --log-file "$W/server$1.log" > "$W/serve$1.out" 2>&1 &
  echo $! > $W/server.pid
  local t0; t0=$(date +%s)
  until grep -q " ready  HTTP" "$W/serve$1.out"; do
    if ! kill -0 "$(cat $W/server.pid)" 2>/dev/null || [ "$(left)" -lt 20 ]; then
      echo "server did not come up"; tail -c 6000 "$W/server$1.log"; cat "$W/serve$1.out"; return 1
    fi
    sleep 2
  done
  ready_s=$(( $(date +%s) - t0 ))
  echo "server ready with both models after $ready_s s"
}

stop() {  # the server started by serve (its pid in $W/server.pid), then its GPU memory freed
  [ -f $W/server.pid ] || return 0
  kill "$(cat $W/server.pid)" 2>/dev/null
  for _ in $(seq 60); do kill -0 "$(cat $W/server.pid)" 2>/dev/null || break; sleep 1; done
  rm -f $W/server.pid
  for _ in $(seq 30); do  # NOTE: the vLLM engine processes exit after their stubs; wait for the GPU memory
    used=$(nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits | head -1)
    [ "${used:-0}" -lt 2000 ] && break; sleep 1
  done
}
