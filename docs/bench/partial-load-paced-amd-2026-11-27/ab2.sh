#!/bin/bash
# usage: ab2.sh NAME CONNS RATE server-bin [args...]  (RATE 0: as fast as replies come)
name=$1 conns=$2 rate=$3; shift 3
port=$((21000 + RANDOM % 1000))
taskset -c 0 env GOMAXPROCS=1 "$@" -addr 127.0.0.1:$port > /dev/null 2>&1 &
spid=$!
sleep 0.5
taskset -c 1 /tmp/s38/bin/ringload -proto echo -addr 127.0.0.1:$port -conns $conns -rate $rate -size 1024 -json -warmup 1s -duration 3s -server-pid $spid 2>/dev/null | python3 -c "import json,sys; d=json.load(sys.stdin); print('$name', $conns, $rate, round(d['server_cpu_us_per_req'],3), round(d['req_per_s']), round(d['p99_us']), round(d['syscalls_per_req'],2))"
kill $spid; wait $spid 2>/dev/null
