#!/bin/bash
# usage: BIN=dir OUT=dir syscalls.sh NAME ringecho-args...
B=${BIN:?directory with ringecho and ringload}
name=$1; shift
port=$((17000 + RANDOM % 1000))
taskset -c 0 $B/ringecho -network udp4 -addr 127.0.0.1:$port -reply "$@" > ${OUT:-.}/$name.srv.log 2>&1 &
spid=$!
sleep 0.5
taskset -c 1 $B/ringload -proto udp-rr -addr 127.0.0.1:$port -conns 100 -size 64 -json -rate 20000 -warmup 1s -duration 5s -server-pid $spid > ${OUT:-.}/$name.load.txt 2>&1 &
lpid=$!
sleep 2
cs0=$(cat /proc/$spid/task/*/status | awk "/voluntary_ctxt_switches/{s+=\$2} END{print s}"); t0=$(awk "{print \$14+\$15}" /proc/$spid/stat)
perf record -q -e raw_syscalls:sys_enter -p $spid -o ${OUT:-.}/$name.data -- sleep 3 2>/dev/null
cs1=$(cat /proc/$spid/task/*/status | awk "/voluntary_ctxt_switches/{s+=\$2} END{print s}"); t1=$(awk "{print \$14+\$15}" /proc/$spid/stat); echo "ctxsw $((cs1-cs0)) ticks $((t1-t0))"
wait $lpid
kill $spid; wait $spid 2>/dev/null
perf script -i ${OUT:-.}/$name.data -F trace 2>/dev/null | awk "{print \$2}" | sort | uniq -c | sort -rn | head -8 > ${OUT:-.}/$name.sys
echo "== $name"; head -c 300 ${OUT:-.}/$name.load.txt; echo; cat ${OUT:-.}/$name.sys
