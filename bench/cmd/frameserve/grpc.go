package main

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/grpc/benchmark"
)

// startGRPC serves grpc-go's benchmark service on the kind's listener as
// grpc-go's own benchmark server (benchmark/server) does:
// benchmark.StartServer with the protobuf codec and 128 KiB read and write
// buffers (without that program's CPU profiling).
func startGRPC(cfg config) (*running, error) {
	ln, err := listen(cfg.kind, cfg.addr)
	if err != nil {
		return nil, err
	}
	stop := benchmark.StartServer(benchmark.ServerInfo{Type: "protobuf", Listener: ln},
		grpc.WriteBufferSize(128*1024), grpc.ReadBufferSize(128*1024))
	r := &running{addr: ln.Addr().String(), done: make(chan error, 1)}
	r.stop = func(context.Context) error {
		stop() // grpc.Server.Stop: closes the listener and every connection
		return nil
	}
	return r, nil
}
