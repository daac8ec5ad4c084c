# Sourced by h200.sh and h200_8b.sh (W: their work directory).
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
