package kvproto

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/ringpoll/ringpoll/internal/rpcframe"
)

// TestRequests: what AppendGet and AppendPut frame, ParseRequest reads
// back; malformed payloads are refused.
func TestRequests(t *testing.T) {
	for _, tc := range []struct {
		name string
		b    []byte
		op   byte
		i    uint64
	}{
		{"get", AppendGet(nil, 7), OpGet, 7},
		{"put", AppendPut(nil, 1<<40), OpPut, 1 << 40},
	} {
		n, err := rpcframe.PayloadLen(tc.b)
		if err != nil || n != len(tc.b)-rpcframe.HeaderLen {
			t.Fatalf("%s: frame announces %d bytes (%v), carries %d", tc.name, n, err, len(tc.b)-rpcframe.HeaderLen)
		}
		op, i, rec, err := ParseRequest(tc.b[rpcframe.HeaderLen:])
		if err != nil || op != tc.op || i != tc.i {
			t.Fatalf("%s: ParseRequest = %q, %d, %v", tc.name, op, i, err)
		}
		if op == OpPut {
			if err := Check(i, rec); err != nil {
				t.Fatalf("put's record: %v", err)
			}
		}
	}
	for _, bad := range [][]byte{nil, {OpGet}, append([]byte{OpGet}, make([]byte, 9)...), append([]byte{'X'}, make([]byte, 8)...), append([]byte{OpPut}, make([]byte, 8)...)} {
		if _, _, _, err := ParseRequest(bad); err == nil {
			t.Errorf("ParseRequest(%q) succeeded", bad)
		}
	}
}

// TestCheck: a record checks as itself and as no other; a changed byte
// fails it.
func TestCheck(t *testing.T) {
	b := make([]byte, RecordSize)
	Record(42, b)
	if err := Check(42, b); err != nil {
		t.Fatal(err)
	}
	if Check(43, b) == nil {
		t.Fatal("record 42 checks as record 43")
	}
	b[100] ^= 1
	if Check(42, b) == nil {
		t.Fatal("a changed byte checks")
	}
	if Check(42, b[:100]) == nil {
		t.Fatal("a short record checks")
	}
}

// TestPrepareFile: a new file holds every record; a second call keeps it;
// a file of another size is made anew.
func TestPrepareFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kv.dat")
	reused, err := PrepareFile(path, 300, nil)
	if err != nil || reused {
		t.Fatalf("PrepareFile = %v, %v; want a new file", reused, err)
	}
	data, err := os.ReadFile(path)
	if err != nil || len(data) != 300*RecordSize {
		t.Fatalf("the file: %d bytes, %v", len(data), err)
	}
	for i := range 300 {
		if err := Check(uint64(i), data[i*RecordSize:][:RecordSize]); err != nil {
			t.Fatal(err)
		}
	}
	if reused, err := PrepareFile(path, 300, nil); err != nil || !reused {
		t.Fatalf("PrepareFile again = %v, %v; want it kept", reused, err)
	}
	if reused, err := PrepareFile(path, 301, nil); err != nil || reused {
		t.Fatalf("PrepareFile of another size = %v, %v; want a new file", reused, err)
	}
}

// FuzzParseRequest: any payload parses or fails, never panics, and a
// parsed put carries exactly one record.
func FuzzParseRequest(f *testing.F) {
	f.Add(AppendGet(nil, 1)[rpcframe.HeaderLen:])
	f.Add(AppendPut(nil, 2)[rpcframe.HeaderLen:])
	f.Fuzz(func(t *testing.T, p []byte) {
		op, _, rec, err := ParseRequest(p)
		if err == nil && op == OpPut && len(rec) != RecordSize {
			t.Fatalf("a put with a %d-byte record", len(rec))
		}
		if err == nil && op == OpGet && rec != nil {
			t.Fatal("a get with a record")
		}
	})
}
