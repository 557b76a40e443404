#!/bin/bash
# Run at 9a6f2df (2026-11-26, Intel Xeon 2 vCPU), ringecho and ringload built
# from it into /tmp/diag. 10 interleaved rounds of std, uring and epoll
# (ringecho -api std, or the inline PacketServer), 4 s each after 500 ms of
# warm-up: server on CPU 0 (port 7200), ringload -proto udp-rr of 100
# clients at 20,000 requests/s from CPU 1, every request logged
# (-latency-log); episodes.py reads the logs.
cd /tmp/diag
for r in $(seq 1 10); do
  for a in std uring epoll; do
    case $a in
      std) set -- ./ringecho -api std;;
      uring) set -- ./ringecho -engine uring -api inline;;
      epoll) set -- ./ringecho -engine epoll -api inline;;
    esac
    taskset -c 0 "$@" -network udp4 -addr 127.0.0.1:7200 -reply > ep/srv.log 2>&1 &
    SP=$!
    sleep 0.7
    echo "$a $r $(taskset -c 1 ./ringload -proto udp-rr -addr 127.0.0.1:7200 -conns 100 -size 64 -rate 20000 -warmup 500ms -duration 4s -latency-log ep/log-$a-$r.txt)"
    kill $SP; wait $SP 2>/dev/null
  done
done
