#!/usr/bin/env python3
"""The agent socket under one user's read burst (issue 20, finding 3), as the security review tried it.

Root fills the store with big job records; a second Unix user then opens CONNS connections, asks each for
1000 records and never reads. Meanwhile root (another uid) connects, waits for the greeting, takes a lease
and releases it, ten times a second. Prints the worst greeting and lease times and the agent's RSS growth.

Usage (as root): bench/agent_socket_burst.py [GPUFLEET_BINARY] [--user NAME] [--conns N] [--records N]
"""
import argparse
import json
import os
import pwd
import socket
import subprocess
import sys
import tempfile
import time


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def connect(path, timeout=30.0):
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(timeout)
    s.connect(path)
    return s, s.makefile("rwb")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("binary", nargs="?", default="build/gpufleet")
    ap.add_argument("--user", default="gf-test-a")
    ap.add_argument("--conns", type=int, default=60)
    ap.add_argument("--records", type=int, default=500)
    ap.add_argument("--seconds", type=float, default=10.0)
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("agent_socket_burst: run as root (the burst comes from a second user)")
    user = pwd.getpwnam(a.user)
    d = tempfile.mkdtemp(prefix="gf-burst.")
    os.chmod(d, 0o755)
    sock = os.path.join(d, "run", "agent.sock")
    env = dict(os.environ, GPUFLEET_SIM_SCENARIO=os.path.abspath("tests/fixtures/sim/two_idle.json"))
    agent = subprocess.Popen([a.binary, "--backend", "sim", "--sim-gpus", "8", "serve", "--listen", "127.0.0.1:0",
                              "--no-history", "--socket", sock, "--db", os.path.join(d, "agent.db")],
                             env=env, stderr=subprocess.DEVNULL)
    try:
        for _ in range(100):
            if os.path.exists(sock):
                break
            time.sleep(0.1)
        s, f = connect(sock)
        f.readline()
        pad = "A" * 60000
        for i in range(a.records):
            f.write((json.dumps({"id": i + 1, "op": "job_put", "job": {
                "name": "fill", "status": "succeeded", "command": ["x"], "started_at_ms": i, "ended_at_ms": i + 1,
                "record": {"pad": pad}}}) + "\n").encode())
            f.flush()
            f.readline()
        s.close()
        time.sleep(1.0)
        rss0 = rss_kib(agent.pid)

        pid = os.fork()
        if pid == 0:  # the burst, as the second user: ask and never read
            os.setgroups([])
            os.setgid(user.pw_gid)
            os.setuid(user.pw_uid)
            cs = []
            for _ in range(a.conns):
                c = socket.socket(socket.AF_UNIX)
                c.connect(sock)
                c.recv(4096)
                cs.append(c)
            for c in cs:
                c.sendall(b'{"id":1,"op":"jobs","limit":1000}\n')
            time.sleep(a.seconds + 2)
            os._exit(0)

        worst_greet = worst_lease = 0.0
        failures = 0
        rounds = 0
        end = time.monotonic() + a.seconds
        while time.monotonic() < end:
            t0 = time.monotonic()
            try:
                s, f = connect(sock)
                f.readline()
                t1 = time.monotonic()
                f.write(b'{"id":1,"op":"acquire","gpus":1,"wait_s":0}\n')
                f.flush()
                r = json.loads(f.readline())
                if r.get("ok"):
                    f.write(json.dumps({"id": 2, "op": "release", "lease": r["lease"]["id"]}).encode() + b"\n")
                    f.flush()
                    f.readline()
                t2 = time.monotonic()
                s.close()
                worst_greet = max(worst_greet, t1 - t0)
                worst_lease = max(worst_lease, t2 - t1)
            except (OSError, ValueError):
                failures += 1
            rounds += 1
            time.sleep(0.1)
        rss1 = rss_kib(agent.pid)
        os.waitpid(pid, 0)
        print(f"{a.binary}: {a.conns} unread `jobs` of {a.records} x 60 kB records from {a.user}; "
              f"root over {rounds} rounds: worst greeting {worst_greet * 1000:.0f} ms, worst acquire+release "
              f"{worst_lease * 1000:.0f} ms, {failures} failed; agent RSS +{(rss1 - rss0) / 1024:.0f} MiB")
    finally:
        agent.terminate()
        agent.wait()
        subprocess.run(["rm", "-rf", d])


if __name__ == "__main__":
    main()
