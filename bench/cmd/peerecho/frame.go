package main

import (
	"encoding/binary"
	"fmt"
)

// The rpc protocol's frame: a big-endian uint32 payload length, then the
// payload.
const (
	// frameHeaderLen is the size of a frame's length prefix.
	frameHeaderLen = 4
	// maxFramePayload is the largest payload a frame may announce; a bigger
	// length is a protocol error that closes the connection.
	maxFramePayload = 16 << 20
)

// payloadLen decodes a frame header (the first frameHeaderLen bytes of hdr)
// and returns the payload length it announces, or an error if that length
// is over maxFramePayload.
func payloadLen(hdr []byte) (int, error) {
	n := binary.BigEndian.Uint32(hdr)
	if n > maxFramePayload {
		return 0, fmt.Errorf("rpc frame announces %d payload bytes, limit is %d", n, maxFramePayload)
	}
	return int(n), nil
}

// putFrame writes a frame carrying payload into dst, which must hold at least
// frameHeaderLen+len(payload) bytes, and returns the number of bytes written.
// This copy is the rpc handler's work: the reply is built in dst, never in
// the request's own memory.
func putFrame(dst, payload []byte) int {
	binary.BigEndian.PutUint32(dst, uint32(len(payload)))
	return frameHeaderLen + copy(dst[frameHeaderLen:], payload)
}
