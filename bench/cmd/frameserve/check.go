package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"reflect"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	testpb "google.golang.org/grpc/interop/grpc_testing"
)

// grpcCheckSize is the response payload a gRPC check asks for.
const grpcCheckSize = 100

// check makes one request of kind what to the server at addr and checks
// the answer; it returns a description of what it got.
func check(ctx context.Context, what, addr, file string) (string, error) {
	switch what {
	case "grpc-unary", "grpc-stream":
		return checkGRPC(ctx, what == "grpc-stream", addr)
	case "quic-bulk":
		return checkQUIC(ctx, addr, quicBulkCheckSize)
	case "quic-small":
		return checkQUIC(ctx, addr, quicSmallCheckSize)
	case "dns":
		return checkDNS(ctx, addr)
	case "h2c-hello":
		tr := &http.Transport{Protocols: new(http.Protocols)}
		tr.Protocols.SetUnencryptedHTTP2(true) // prior knowledge, as h2load
		defer tr.CloseIdleConnections()
		return checkHTTP(ctx, tr, "http://"+addr+"/hello", 2, equalBytes([]byte(helloBody)))
	}
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	url := "http://" + addr + "/" + what
	switch what {
	case "hello":
		return checkHTTP(ctx, tr, url, 1, equalBytes([]byte(helloBody)))
	case "json":
		return checkHTTP(ctx, tr, url, 1, func(r io.Reader) (string, error) {
			b, err := io.ReadAll(r)
			if err != nil {
				return "", err
			}
			var d document
			if err := json.Unmarshal(b, &d); err != nil {
				return "", fmt.Errorf("body is not the JSON document: %v", err)
			}
			if !reflect.DeepEqual(d, theDocument) {
				return "", errors.New("body is JSON but not the document")
			}
			return fmt.Sprintf("the %d-byte JSON document", len(b)), nil
		})
	case "file":
		return checkHTTP(ctx, tr, url, 1, func(r io.Reader) (string, error) { return sameAsFile(r, file) })
	}
	return "", fmt.Errorf("no check %q", what)
}

// checkHTTP GETs url and checks the status, the protocol's major version
// and the body.
func checkHTTP(ctx context.Context, tr http.RoundTripper, url string, major int, body func(io.Reader) (string, error)) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := tr.RoundTrip(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("status %s", resp.Status)
	}
	if resp.ProtoMajor != major {
		return "", fmt.Errorf("answered in %s, want HTTP/%d", resp.Proto, major)
	}
	what, err := body(resp.Body)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%s %s, %s", resp.Proto, resp.Status, what), nil
}

// equalBytes checks that a body is want.
func equalBytes(want []byte) func(io.Reader) (string, error) {
	return func(r io.Reader) (string, error) {
		b, err := io.ReadAll(io.LimitReader(r, int64(len(want))+1))
		if err != nil {
			return "", err
		}
		if !bytes.Equal(b, want) {
			return "", fmt.Errorf("body %q, want %q", b, want)
		}
		return fmt.Sprintf("body %q", b), nil
	}
}

// sameAsFile checks that r holds exactly the bytes of the file at path.
func sameAsFile(r io.Reader, path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	want, got := bufio.NewReaderSize(f, 1<<16), bufio.NewReaderSize(r, 1<<16)
	var n int64
	a, b := make([]byte, 1<<16), make([]byte, 1<<16)
	for {
		na, errA := io.ReadFull(want, a)
		nb, errB := io.ReadFull(got, b)
		if !bytes.Equal(a[:na], b[:nb]) {
			return "", fmt.Errorf("body differs from %s within bytes %d to %d", path, n, n+int64(max(na, nb)))
		}
		n += int64(na)
		endA := errors.Is(errA, io.EOF) || errors.Is(errA, io.ErrUnexpectedEOF)
		endB := errors.Is(errB, io.EOF) || errors.Is(errB, io.ErrUnexpectedEOF)
		switch {
		case errA != nil && !endA:
			return "", errA
		case errB != nil && !endB:
			return "", errB
		case endA && endB:
			return fmt.Sprintf("%d bytes, the same as %s", n, path), nil
		}
	}
}

// checkGRPC makes one call of the benchmark service, unary or on a
// stream, and checks the response's payload size.
func checkGRPC(ctx context.Context, stream bool, addr string) (string, error) {
	cc, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return "", err
	}
	defer cc.Close()
	c := testpb.NewBenchmarkServiceClient(cc)
	req := &testpb.SimpleRequest{
		ResponseType: testpb.PayloadType_COMPRESSABLE, ResponseSize: grpcCheckSize,
		Payload: &testpb.Payload{Type: testpb.PayloadType_COMPRESSABLE, Body: make([]byte, 10)},
	}
	var resp *testpb.SimpleResponse
	if stream {
		s, err := c.StreamingCall(ctx)
		if err != nil {
			return "", err
		}
		if err := s.Send(req); err != nil {
			return "", err
		}
		if resp, err = s.Recv(); err != nil {
			return "", err
		}
		if err := s.CloseSend(); err != nil {
			return "", err
		}
	} else if resp, err = c.UnaryCall(ctx, req); err != nil {
		return "", err
	}
	if n := len(resp.GetPayload().GetBody()); n != grpcCheckSize {
		return "", fmt.Errorf("response payload of %d bytes, asked for %d", n, grpcCheckSize)
	}
	return fmt.Sprintf("a %d-byte payload", grpcCheckSize), nil
}
