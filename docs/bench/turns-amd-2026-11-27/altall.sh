#!/bin/bash
U="BIN/ringecho -addr 127.0.0.1:PORT"
for c in 10 100 1000; do
 for peer in "twin|BIN/ringecho -addr 127.0.0.1:PORT" "gnet|BIN/peerecho -impl gnet -proto echo -addr 127.0.0.1:PORT" "std|BIN/ringload -serve-std -addr 127.0.0.1:PORT" "netpoll|BIN/peerecho -impl netpoll -proto echo -addr 127.0.0.1:PORT" "c-liburing|BIN/uring_echo PORT"; do
  name=${peer%%|*}; argv=${peer#*|}
  echo "== $c conns: A uring (default), B $name"
  ./alt.sh $c 40s "$U" "$argv"
 done
done
