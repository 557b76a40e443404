#!/usr/bin/env bash
# even.sh TAG CONNS RATE ENV... -- cmd : server's CPU split over CPUs 0 and 1
B=/tmp/s52/bin
TAG=$1; CONNS=$2; RATE=$3; shift 3
ENVS=(); while [ "$1" != "--" ]; do ENVS+=("$1"); shift; done; shift
env "${ENVS[@]}" taskset -c 0,1 "$@" > /tmp/s52/e-$TAG.srv 2>&1 & P=$!
for i in $(seq 50); do (exec 3<>/dev/tcp/127.0.0.1/17200) 2>/dev/null && break; sleep 0.1; done
( sleep 2; perf record -q -e cpu-clock --sample-cpu -F 999 -p $P -o /tmp/s52/e-$TAG.data -- sleep 3 >/dev/null 2>&1 ) &
PP=$!
timeout 60 taskset -c 0,1 $B/ringload -addr 127.0.0.1:17200 -server-pid $P -conns $CONNS -size 1024 -proto echo -depth 1 -rate $RATE -warmup 1s -duration 5s -json > /tmp/s52/e-$TAG.json 2>/tmp/s52/e-$TAG.err
wait $PP
kill $P; wait $P 2>/dev/null
echo "$TAG $(perf report -i /tmp/s52/e-$TAG.data --sort cpu --stdio -q 2>/dev/null | grep % | tr -s ' ' | tr '\n' ' ')"
