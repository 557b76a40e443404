package ringpoll

import (
	"context"
	"io"
	"testing"
)

var (
	_ io.ByteReader = (*Reader)(nil)
	_ io.ByteWriter = (*Writer)(nil)
)

// TestReaderWriterBytes: ReadByte, ReadString and WriteByte, netpoll's
// names, read and write what they say on every engine, and ReadByte ends
// with io.EOF.
func TestReaderWriterBytes(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e Engine) {
		ln := listen(t, e, "tcp")
		got := make(chan string, 1)
		srv, err := NewServer(func(ctx context.Context, c *Conn) error {
			r, w := c.Reader(), c.Writer()
			first, err := r.ReadByte()
			if err != nil {
				return err
			}
			word, err := r.ReadString(5)
			if err != nil {
				return err
			}
			w.WriteByte('[')
			w.WriteString(word)
			w.WriteByte(first)
			w.WriteByte(']')
			if err := w.Flush(); err != nil {
				return err
			}
			_, err = r.ReadByte()
			got <- string(first) + word + " then " + errString(err)
			return io.EOF
		}, WithEngine(e))
		if err != nil {
			t.Fatal(err)
		}
		go srv.Serve(ln)
		defer srv.Shutdown(context.Background())
		c := tsDialStd(t, "tcp", ln.Addr().String())
		if _, err := c.Write([]byte("Xhello")); err != nil {
			t.Fatal(err)
		}
		reply := make([]byte, 8)
		if _, err := io.ReadFull(c, reply); err != nil || string(reply) != "[helloX]" {
			t.Fatalf("reply %q, %v; want [helloX]", reply, err)
		}
		c.(interface{ CloseWrite() error }).CloseWrite()
		if s := tsRecv(t, got, "the handler"); s != "Xhello then EOF" {
			t.Errorf("handler saw %q", s)
		}
	})
}

func errString(err error) string {
	if err == io.EOF {
		return "EOF"
	}
	if err == nil {
		return "no error"
	}
	return err.Error()
}
