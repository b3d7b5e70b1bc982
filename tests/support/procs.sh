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
