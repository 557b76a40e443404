#!/bin/bash
# usage: ab.sh NAME LOADBIN server-argv...
name=$1 lb=$2; shift 2
port=$((21000 + RANDOM % 1000))
args=("$@"); args=("${args[@]//PORT/$port}")
taskset -c 0 "${args[@]}" > /dev/null 2>&1 &
spid=$!
sleep 0.5
taskset -c 1 $lb -proto echo -addr 127.0.0.1:$port -conns 100 -size 1024 -json -warmup 1s -duration 3s -server-pid $spid 2>/dev/null | python3 -c "import json,sys; d=json.load(sys.stdin); print('$name', '$(basename $lb)', round(d['server_cpu_us_per_req'],3), round(d['req_per_s']), round(d['syscalls_per_req'],2))"
kill $spid; wait $spid 2>/dev/null
