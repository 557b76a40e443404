#!/bin/bash
# Run at cbb0761 (2026-11-26 15:50 UTC), as ../rr-interleaved-c/run.sh but
# with the guest's halt polling on (echo 200000 >
# /sys/module/haltpoll/parameters/guest_halt_poll_ns; 0, the machine's
# setting, restored after): 6 interleaved rounds of std, uring and epoll (inline PacketServer), 4 s each
# (500 ms warm-up), with rr.sh: server on CPU 0, udp-rr of 100 clients at
# 20,000 requests/s from CPU 1; CPU busy is CPU 0's from /proc/stat.
cd /tmp/diag
for r in $(seq 1 6); do
  for a in std uring epoll; do
    case $a in
      std) set -- ./ringecho -api std;;
      uring) set -- ./ringecho -engine uring -api inline;;
      epoll) set -- ./ringecho -engine epoll -api inline;;
    esac
    echo "$a $(./rr.sh "$@" -network udp4 -addr 127.0.0.1:7200 -reply)"
  done
done
