// Package kvproto is the wire format and the data file of ringbench's
// key-value scenario (-kv): a store of fixed 4 KiB records in one file,
// read and written by record number over TCP.
//
// Every message is an internal/rpcframe frame (a 4-byte big-endian
// payload length, then the payload). A request's payload is an operation
// byte and the record number (8 bytes, little-endian), and for a put the
// record's bytes. A get is answered with the record's RecordSize bytes, a
// put with the single byte PutOK once the record is on stable storage
// (after an fsync that may cover other puts too); any other reply is
// an error message.
//
// Record i of the data file holds Record(i): its number, then bytes made
// from it, so a client checks every record it reads (Check) and puts write
// back the same bytes, which keeps the file checkable.
package kvproto

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/ringpoll/ringpoll/internal/rpcframe"
)

// RecordSize is the size of a record, and of the reads and writes of the
// file (aligned for O_DIRECT).
const RecordSize = 4096

// Operations.
const (
	OpGet byte = 'G'
	OpPut byte = 'P'
)

// PutOK is the reply payload of a put that is on stable storage.
const PutOK byte = 'K'

// Request payload sizes.
const (
	GetLen = 1 + 8
	PutLen = GetLen + RecordSize
)

// AppendGet appends a get request of record i, framed, to b.
func AppendGet(b []byte, i uint64) []byte {
	b = binary.BigEndian.AppendUint32(b, GetLen)
	b = append(b, OpGet)
	return binary.LittleEndian.AppendUint64(b, i)
}

// AppendPut appends a put request of record i, framed, to b, with
// Record(i) as its bytes.
func AppendPut(b []byte, i uint64) []byte {
	b = binary.BigEndian.AppendUint32(b, PutLen)
	b = append(b, OpPut)
	b = binary.LittleEndian.AppendUint64(b, i)
	n := len(b)
	b = append(b, make([]byte, RecordSize)...)
	Record(i, b[n:])
	return b
}

// ParseRequest reads a request payload: the operation, the record number
// and, for a put, the record.
func ParseRequest(p []byte) (op byte, i uint64, rec []byte, err error) {
	if len(p) < GetLen {
		return 0, 0, nil, fmt.Errorf("kvproto: a %d-byte request", len(p))
	}
	op, i = p[0], binary.LittleEndian.Uint64(p[1:GetLen])
	switch {
	case op == OpGet && len(p) == GetLen:
		return op, i, nil, nil
	case op == OpPut && len(p) == PutLen:
		return op, i, p[GetLen:], nil
	}
	return 0, 0, nil, fmt.Errorf("kvproto: a %d-byte request of operation %q", len(p), op)
}

// Record fills b (RecordSize bytes) with record i's bytes.
func Record(i uint64, b []byte) {
	binary.LittleEndian.PutUint64(b, i)
	x := i*0x9e3779b97f4a7c15 + 1
	for j := 8; j+8 <= len(b); j += 8 {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		binary.LittleEndian.PutUint64(b[j:], x)
	}
}

// Check returns an error unless b is record i's bytes.
func Check(i uint64, b []byte) error {
	if len(b) != RecordSize {
		return fmt.Errorf("record %d: %d bytes, want %d", i, len(b), RecordSize)
	}
	if got := binary.LittleEndian.Uint64(b); got != i {
		return fmt.Errorf("record %d: holds record %d's number", i, got)
	}
	var want [RecordSize]byte
	Record(i, want[:])
	for j := range b {
		if b[j] != want[j] {
			return fmt.Errorf("record %d: byte %d is %#02x, want %#02x", i, j, b[j], want[j])
		}
	}
	return nil
}

// ReadReply reads one reply frame from r into buf (grown if need be) and
// returns its payload.
func ReadReply(r io.Reader, buf []byte) ([]byte, error) {
	var h [rpcframe.HeaderLen]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return nil, err
	}
	n, err := rpcframe.PayloadLen(h[:])
	if err != nil {
		return nil, err
	}
	if cap(buf) < n {
		buf = make([]byte, n)
	}
	buf = buf[:n]
	_, err = io.ReadFull(r, buf)
	return buf, err
}

// Records returns the number of records in a data file of size bytes.
func Records(size int64) int64 { return size / RecordSize }

// PrepareFile makes path a data file of records records, or keeps the
// one there if it has that size and its first, middle and last records
// check. It reserves the space first (fallocate), so a full disk fails at
// once, and writes the records 1 MiB at a time, then syncs. progress, if
// set, is called with the bytes written so far.
func PrepareFile(path string, records int64, progress func(done, total int64)) (reused bool, err error) {
	if records < 1 {
		return false, errors.New("kvproto: a data file needs at least one record")
	}
	size := records * RecordSize
	if ok, _ := fileHolds(path, records); ok {
		return true, nil
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return false, err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			os.Remove(path)
		}
	}()
	if err := fallocate(f, size); err != nil {
		return false, err
	}
	const chunk = 1 << 20
	buf := make([]byte, chunk)
	for off := int64(0); off < size; off += chunk {
		n := min(chunk, size-off)
		for j := int64(0); j < n; j += RecordSize {
			Record(uint64((off+j)/RecordSize), buf[j:j+RecordSize])
		}
		if _, err := f.WriteAt(buf[:n], off); err != nil {
			return false, err
		}
		if progress != nil && (off/chunk)%256 == 0 {
			progress(off+n, size)
		}
	}
	return false, f.Sync()
}

// fileHolds reports whether path is a data file of records records, going
// by its size and three of its records.
func fileHolds(path string, records int64) (bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return false, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || st.Size() != records*RecordSize {
		return false, err
	}
	buf := make([]byte, RecordSize)
	for _, i := range []int64{0, records / 2, records - 1} {
		if _, err := f.ReadAt(buf, i*RecordSize); err != nil {
			return false, err
		}
		if Check(uint64(i), buf) != nil {
			return false, nil
		}
	}
	return true, nil
}
