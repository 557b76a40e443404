#!/bin/bash
# alt.sh CONNS DURATION "A argv" "B argv" [extra ringload args]
PA=$((7000 + RANDOM % 900)); PB=$((PA + 1000))
a=${3//BIN//tmp/s53/bin}; a=${a//PORT/$PA}; b=${4//BIN//tmp/s53/bin}; b=${b//PORT/$PB}
taskset -c 0 env GOMAXPROCS=1 $a >/dev/null 2>&1 & apid=$!
taskset -c 0 env GOMAXPROCS=1 $b >/dev/null 2>&1 & bpid=$!
sleep 0.6
taskset -c 1 /tmp/s53/bin/ringload -addr 127.0.0.1:$PA -server-pid $apid -alt-addr 127.0.0.1:$PB -alt-pid $bpid -conns $1 -warmup 1s -duration $2 -alt-period 500ms $5
kill $apid $bpid; wait $apid $bpid 2>/dev/null
