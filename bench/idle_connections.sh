#!/usr/bin/env bash
# The agent's memory with N idle, unauthenticated TCP connections open (issue 12): VmRSS before, with
# them open (and VmHWM), and after they close. Half of the clients send a partial request line, half
# nothing; they come from 16 loopback addresses (127.0.0.1-16), so the per-address cap (256) admits
# them all. Usage: bench/idle_connections.sh BINARY [BINARY...]   (N=4000 by default)
set -euo pipefail
N=${N:-4000}
ulimit -n $((N + 1024))
for bin in "$@"; do
  dir=$(mktemp -d)
  "$bin" --backend sim serve --listen 127.0.0.1:0 --db "$dir/db.sqlite" --token-file "$dir/token" \
    --port-file "$dir/port" --no-history >"$dir/log" 2>&1 &
  pid=$!
  for _ in $(seq 100); do [ -s "$dir/port" ] && break; sleep 0.1; done
  port=$(cat "$dir/port")
  echo "== $bin (pid $pid, port $port, $N connections)"
  python3 - "$port" "$pid" "$N" <<'PY'
import socket, sys, time
port, pid, n = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
def mem():
    out = {}
    for line in open(f"/proc/{pid}/status"):
        k, _, v = line.partition(":")
        if k in ("VmRSS", "VmHWM"): out[k] = int(v.split()[0]) / 1024
    return out
def health():
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.sendall(b"GET /api/health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
    data = s.recv(100); s.close(); return data[:12].decode()
health(); time.sleep(0.5)
before = mem()
socks = []
for i in range(n):
    s = socket.socket()
    s.bind((f"127.0.0.{1 + i % 16}", 0))
    s.connect(("127.0.0.1", port))
    if i % 2: s.sendall(b"GET /api/hea")
    socks.append(s)
time.sleep(2)
during = mem()
ok = health()
for s in socks: s.close()
time.sleep(3)
after = mem()
print(f"RSS before {before['VmRSS']:.1f} MiB | with {n} open {during['VmRSS']:.1f} MiB (HWM {during['VmHWM']:.1f}) "
      f"= {(during['VmRSS'] - before['VmRSS']) * 1024 / n:.2f} KiB/connection | after close {after['VmRSS']:.1f} MiB "
      f"| a new client meanwhile: {ok}")
PY
  kill -TERM "$pid"; wait "$pid" || true
  rm -rf "$dir"
done
