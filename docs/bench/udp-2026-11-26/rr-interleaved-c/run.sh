#!/bin/bash
# Run at cbb0761 (2026-11-26 15:45 UTC, Intel Xeon 2 vCPU), ringecho and
# ringload built from it into /tmp/diag: 12 interleaved rounds of std, uring and epoll (inline PacketServer), 4 s each
# (500 ms warm-up), with rr.sh: server on CPU 0, udp-rr of 100 clients at
# 20,000 requests/s from CPU 1; CPU busy is CPU 0's from /proc/stat.
cd /tmp/diag
for r in $(seq 1 12); do
  for a in std uring epoll; do
    case $a in
      std) set -- ./ringecho -api std;;
      uring) set -- ./ringecho -engine uring -api inline;;
      epoll) set -- ./ringecho -engine epoll -api inline;;
    esac
    echo "$a $(./rr.sh "$@" -network udp4 -addr 127.0.0.1:7200 -reply)"
  done
done
