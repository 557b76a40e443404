#!/bin/bash
# Run at bd587b9 (2026-11-26 16:40 UTC, Intel Xeon 2 vCPU) with ringecho
# built with ringecho-trace.diff applied (it logs, for every datagram it
# reads, the client number in the payload and the time; RINGECHO_TRACE
# names the file) into /tmp/diag/ringecho-trace, and bench/c/udp_rr.c
# built into /tmp/diag/udp_rr: 3 interleaved rounds of std, uring and epoll,
# 4 s each after 500 ms, 100 C clients at 20,000 requests/s from CPU 1,
# server on CPU 0. split.py joins each client request with the server's
# read of it (output: split.txt).
cd /tmp/diag
for r in 1 2 3; do
  for a in std uring epoll; do
    case $a in
      std) set -- ./ringecho-trace -api std;;
      uring) set -- ./ringecho-trace -engine uring -api inline;;
      epoll) set -- ./ringecho-trace -engine epoll -api inline;;
    esac
    RINGECHO_TRACE=tr/srv-$a-$r.txt taskset -c 0 "$@" -network udp4 -addr 127.0.0.1:7200 -reply > tr/srv.log 2>&1 &
    SP=$!
    sleep 0.7
    echo "$a $r $(taskset -c 1 ./udp_rr -l tr/log-$a-$r.txt 127.0.0.1 7200 100 20000 64 500 4000)"
    kill $SP; wait $SP 2>/dev/null
  done
done
