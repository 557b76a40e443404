#!/bin/bash
# Run as ../rr-episodes-c/run.sh, but with the guest's halt polling on
# (guest_halt_poll_ns=200000, 0 restored after) and 6 rounds: the C client
# bench/c/udp_rr.c (built with cc -O2 into /tmp/diag/udp_rr) in place of
# ringload: 6 interleaved rounds
# of std, uring and epoll, 4 s each after 500 ms, 100 clients at 20,000
# requests/s from CPU 1, server on CPU 0, every request logged.
cd /tmp/diag
for r in $(seq 1 6); do
  for a in std uring epoll; do
    case $a in
      std) set -- ./ringecho -api std;;
      uring) set -- ./ringecho -engine uring -api inline;;
      epoll) set -- ./ringecho -engine epoll -api inline;;
    esac
    taskset -c 0 "$@" -network udp4 -addr 127.0.0.1:7200 -reply > ceph/srv.log 2>&1 &
    SP=$!
    sleep 0.7
    echo "$a $r $(taskset -c 1 ./udp_rr -l ceph/log-$a-$r.txt 127.0.0.1 7200 100 20000 64 500 4000)"
    kill $SP; wait $SP 2>/dev/null
  done
done
