# Sourced by the test scripts: stopping what they started, by PID.
#
# stop_pid PID [SIGNAL [SECONDS]]: sends SIGNAL (default TERM), waits up to
# SECONDS (default 5) for the process to end, then sends SIGKILL. DPDK
# programs clean up on TERM or INT; testpmd only on INT.
stop_pid() {
  local pid=$1 sig=${2:-TERM} secs=${3:-5}
  kill -"$sig" "$pid" 2>/dev/null || return 0
  for _ in $(seq $((secs * 10))); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.1; done
  kill -KILL "$pid" 2>/dev/null || true
}

# print_logs DIR: the tail of every *.log in DIR, for a failure report.
print_logs() {
  local f
  for f in "$1"/*.log; do
    [ -f "$f" ] && { echo "---- $f"; tail -n 20 "$f"; }
  done
  return 0
}

# free_port [CMD...]: a TCP port the kernel just reported free (bound to port
# 0, then closed), instead of one derived from the PID that may be taken.
# CMD runs the probe elsewhere, e.g. "free_port ip netns exec NS".
free_port() {
  "$@" python3 -c 'import socket; s = socket.socket(); s.bind(("", 0)); print(s.getsockname()[1])'
}

# wait_exit PID SECONDS: waits for a child of this shell to end, at most
# SECONDS; returns its exit status, or 124 when it is still running.
wait_exit() {
  local pid=$1 secs=$2
  for _ in $(seq $((secs * 10))); do
    kill -0 "$pid" 2>/dev/null || { wait "$pid"; return $?; }
    sleep 0.1
  done
  echo "process $pid still running after $secs s"
  return 124
}
