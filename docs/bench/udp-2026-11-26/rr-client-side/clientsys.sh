#!/bin/bash
# Run at 9a6f2df (2026-11-26 16:10 UTC, Intel Xeon 2 vCPU), ringecho and
# ringload built from it into /tmp/diag, 3 rounds of std, uring and epoll
# with the guest's halt polling off (guest_halt_poll_ns=0, the machine's
# setting) and 3 with it on (200000); out.txt, per second.
# clientsys.sh NAME argv...: server on CPU 0, udp-rr from CPU 1; the
# client's system calls by kind and context switches (perf stat on its PID)
# over 2 s of the run, per second
cd /tmp/diag
N=$1; shift
taskset -c 0 "$@" -network udp4 -addr 127.0.0.1:7200 -reply > ep/srv.log 2>&1 &
SP=$!
sleep 0.7
taskset -c 1 ./ringload -proto udp-rr -addr 127.0.0.1:7200 -conns 100 -size 64 -rate 20000 -warmup 500ms -duration 4s > ep/cs.out &
LP=$!
sleep 1.2
perf stat -e 'syscalls:sys_enter_epoll_pwait,syscalls:sys_enter_futex,syscalls:sys_enter_nanosleep,syscalls:sys_enter_read,syscalls:sys_enter_write,syscalls:sys_enter_recvfrom,syscalls:sys_enter_sendto,context-switches' -p $LP -x, -o ep/cs.perf -- sleep 2
wait $LP
kill $SP; wait $SP 2>/dev/null
echo "$N $(grep -o 'p50 [0-9]*µs p99 [0-9]*' ep/cs.out) $(awk -F, '/^[0-9]/{split($3,a,":"); printf "%s=%d ", a[length(a)], $1/2}' ep/cs.perf)"
