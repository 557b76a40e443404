package rpcframe

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
)

func frame(payload string) []byte {
	b := make([]byte, HeaderLen+len(payload))
	PutHeader(b, len(payload))
	copy(b[HeaderLen:], payload)
	return b
}

// byteReader hands out one byte per Read, so every frame is split at
// every possible boundary.
type byteReader struct{ r io.Reader }

func (b byteReader) Read(p []byte) (int, error) { return b.r.Read(p[:min(1, len(p))]) }

func TestServe(t *testing.T) {
	payloads := []string{"", "a", strings.Repeat("xyz", 1000), "last"}
	var in bytes.Buffer
	for _, p := range payloads {
		in.Write(frame(p))
	}
	want := bytes.Clone(in.Bytes())
	for _, tc := range []struct {
		name string
		r    io.Reader
	}{{"whole", bytes.NewReader(want)}, {"byte by byte", byteReader{bytes.NewReader(want)}}} {
		var out bytes.Buffer
		if err := Serve(tc.r, &out, 64); err != nil {
			t.Fatalf("%s: Serve: %v", tc.name, err)
		}
		if !bytes.Equal(out.Bytes(), want) {
			t.Errorf("%s: replies differ from requests (%d bytes, want %d)", tc.name, out.Len(), len(want))
		}
	}
}

func TestServeBadInput(t *testing.T) {
	huge := make([]byte, HeaderLen)
	PutHeader(huge, MaxPayload+1)
	var out bytes.Buffer
	if err := Serve(bytes.NewReader(append(frame("ok"), huge...)), &out, 64); !errors.Is(err, ErrTooLarge) {
		t.Errorf("oversized frame: err %v, want ErrTooLarge", err)
	}
	// The good frame before it was answered.
	if !bytes.Equal(out.Bytes(), frame("ok")) {
		t.Errorf("reply before the bad frame: %q", out.Bytes())
	}
	truncated := frame("truncated")[:7]
	if err := Serve(bytes.NewReader(truncated), io.Discard, 64); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("truncated frame: err %v, want io.ErrUnexpectedEOF", err)
	}
	if n, err := PayloadLen(frame(strings.Repeat("z", 300))); n != 300 || err != nil {
		t.Errorf("PayloadLen = %d, %v", n, err)
	}
}
