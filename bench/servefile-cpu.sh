#!/usr/bin/env bash
# bench/servefile-cpu.sh: where the CPU of an http.ServeFile download goes
# on loopback, counted per CPU rather than per server thread. Run from the
# repository root (needs wrk and python3):
#
#   bash bench/servefile-cpu.sh
#   ROUNDS=9 SERVERS="http-std http-ringpoll http-ringpoll-epoll" bash bench/servefile-cpu.sh
#
# ringbench's file scenario charges the server the CPU time of its own
# threads (schedstat). On loopback the receiving side's TCP work runs in
# softirqs on whichever CPU raised them, in whatever task happened to run
# there, so that figure moves with where the kernel did the work, not with
# what the server's code costs. This script counts instead every busy
# jiffy of the server's CPU (user, system, irq and softirq, from
# /proc/stat) and of the client's CPU, over a 4 s wrk run of 4 connections
# downloading a 64 MiB file (after a 1 s warm-up), for each server in turn,
# ROUNDS times, servers interleaved. It prints one line per run, then
# medians: seconds of server CPU per GB, seconds of both CPUs per GB, and
# the paired ratios against the first server (bytes per CPU-second, above
# 1: cheaper than it).
#
# Environment (defaults): ROUNDS=7, SERVERS="http-std http-ringpoll",
# SERVER_CPU=0, CLIENT_CPU=1, PORT=7230 (each run adds its index).
set -euo pipefail
ROUNDS=${ROUNDS:-7}
SERVERS=${SERVERS:-"http-std http-ringpoll"}
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
PORT=${PORT:-7230}

command -v wrk >/dev/null || { echo "servefile-cpu: wrk not found (apt-get install wrk)" >&2; exit 1; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
(cd bench && go build -o "$dir/frameserve" ./cmd/frameserve)
head -c $((64 << 20)) /dev/urandom >"$dir/file"

busy() { grep -E "^cpu($SERVER_CPU|$CLIENT_CPU) " /proc/stat; }

run=0
for round in $(seq "$ROUNDS"); do
	for s in $SERVERS; do
		run=$((run + 1))
		port=$((PORT + run))
		taskset -c "$SERVER_CPU" "$dir/frameserve" -server "$s" -addr "127.0.0.1:$port" -file "$dir/file" >"$dir/server.log" 2>&1 &
		pid=$!
		for _ in $(seq 100); do
			"$dir/frameserve" -check file -addr "127.0.0.1:$port" -file "$dir/file" >/dev/null 2>&1 && break
			sleep 0.05
		done
		taskset -c "$CLIENT_CPU" wrk -t1 -c4 -d1s "http://127.0.0.1:$port/file" >/dev/null
		before=$(busy)
		taskset -c "$CLIENT_CPU" wrk -t1 -c4 -d4s "http://127.0.0.1:$port/file" >"$dir/wrk.txt"
		after=$(busy)
		kill "$pid"
		wait "$pid" 2>/dev/null || true
		python3 - "$s" "$round" "$SERVER_CPU" "$CLIENT_CPU" "$before" "$after" "$dir/wrk.txt" <<'PY' | tee -a "$dir/runs"
import re, sys
name, rnd, scpu, ccpu, before, after, wrk = sys.argv[1:]
def jiffies(text):
    out = {}
    for line in text.splitlines():
        f = line.split()
        v = list(map(int, f[1:]))
        out[f[0]] = sum(v) - v[3] - v[4]  # all but idle and iowait
    return out
a, b = jiffies(before), jiffies(after)
m = re.search(r"([\d.]+)(GB|MB) read", open(wrk).read())
gb = float(m.group(1)) / (1 if m.group(2) == "GB" else 1024)
srv = (b["cpu" + scpu] - a["cpu" + scpu]) / 100
cli = (b["cpu" + ccpu] - a["cpu" + ccpu]) / 100
print(f"{name} round={rnd} gb={gb:.2f} server_cpu_s={srv:.2f} client_cpu_s={cli:.2f} "
      f"server_s_per_gb={srv / gb:.3f} total_s_per_gb={(srv + cli) / gb:.3f}")
PY
	done
done

python3 - "$dir/runs" <<'PY'
import statistics, sys
runs = {}
order = []
for line in open(sys.argv[1]):
    f = line.split()
    kv = dict(x.split("=") for x in f[1:])
    if f[0] not in runs:
        order.append(f[0])
    runs.setdefault(f[0], {})[kv["round"]] = kv
ref = order[0]
print()
print(f"| server | server CPU s/GB | both CPUs s/GB | GB per 4 s | paired bytes per server CPU-s vs {ref} | paired bytes per CPU-s of both vs {ref} |")
print("|---|---:|---:|---:|---:|---:|")
for s in order:
    r = runs[s]
    med = lambda k: statistics.median(float(v[k]) for v in r.values())
    def paired(k):
        q = sorted(float(runs[ref][i][k]) / float(v[k]) for i, v in r.items() if i in runs[ref])
        return f"{statistics.median(q):.2f} ({q[0]:.2f}-{q[-1]:.2f})"
    print(f"| {s} | {med('server_s_per_gb'):.3f} | {med('total_s_per_gb'):.3f} | {med('gb'):.2f} | {paired('server_s_per_gb')} | {paired('total_s_per_gb')} |")
PY
