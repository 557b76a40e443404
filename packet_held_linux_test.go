package ringpoll

// The UDP side of issue 45's rule: memory a reader can see (a Batch's
// Packets, a PacketServer handler's datagrams) keeps its bytes, whoever
// closes the socket meanwhile, until the reader lets it go.

import (
	"bytes"
	"context"
	"fmt"
	"testing"
)

// TestPacketBatchHeldAfterClose: Packets read into a Batch keep their
// bytes after their PacketConn is closed and other sockets of the same
// engine receive many datagrams.
func TestPacketBatchHeldAfterClose(t *testing.T) {
	forEachPacketSetup(t, func(t *testing.T, e Engine, network, addr string) {
		a, b, c := pcListen(t, e, network, addr), pcListen(t, e, network, addr), pcListen(t, e, network, addr)
		want := bytes.Repeat([]byte{'v'}, 1000)
		if _, err := a.WriteToAddrPort(want, pcAddrPort(b)); err != nil {
			t.Fatal(err)
		}
		batch := pcBatch(t, 4, 2048)
		pcDeadline(t, b)
		held, err := b.ReadBatch(batch)
		if err != nil || len(held) != 1 {
			t.Fatalf("ReadBatch = %d packets, %v", len(held), err)
		}
		b.Close()
		pcPump(t, a, c, 200)
		if !bytes.Equal(held[0].Data, want) {
			t.Errorf("the held packet changed after Close: %q...", held[0].Data[:16])
		}
		batch.Release()
	})
}

// TestPacketServerHeldAfterClose: a pooled PacketServer handler holds the
// datagrams it was given while its server is closed; another server of
// the same engine and shape (which may take over the first one's receive
// memory once it is free) then serves many datagrams. The held datagrams
// must keep their bytes until the handler returns.
func TestPacketServerHeldAfterClose(t *testing.T) {
	forEachPacketSetup(t, func(t *testing.T, e Engine, network, addr string) {
		opts := []Option{WithEngine(e), WithPacketBatch(4, 2048)}
		want := bytes.Repeat([]byte{'v'}, 1000)
		holding, check := make(chan []byte, 1), make(chan struct{})
		done := make(chan error, 1)
		victim := pcListen(t, e, network, addr)
		s1, err := NewPacketServer(PacketHandlerFunc(func(w *PacketWriter, in []Packet) {
			b := in[0].Data
			holding <- b
			<-check
			if !bytes.Equal(b, want) {
				done <- fmt.Errorf("the held datagram changed after Close: %q...", b[:16])
				return
			}
			done <- nil
		}), opts...)
		if err != nil {
			t.Fatal(err)
		}
		go s1.Serve(victim)
		sender := pcListen(t, e, network, addr)
		if _, err := sender.WriteToAddrPort(want, pcAddrPort(victim)); err != nil {
			t.Fatal(err)
		}
		tsRecv(t, holding, "the handler to hold its datagram")
		s1.Close()
		// The same shape again: a ring of the same size takes the arena a
		// stopped one gave back, if it gave it back.
		other := pcListen(t, e, network, addr)
		psServe(t, psEcho, []*PacketConn{other}, opts...)
		if err := psPingPong(other.LocalAddr().String(), network, e, 0, 200); err != nil {
			t.Fatal(err)
		}
		close(check)
		if err := tsRecv(t, done, "the handler to return"); err != nil {
			t.Error(err)
		}
		if err := s1.Shutdown(context.Background()); err != nil {
			t.Errorf("Shutdown after Close: %v", err)
		}
	})
}

// pcPump sends n datagrams of 1000 bytes from a to c and reads each.
func pcPump(t *testing.T, a, c *PacketConn, n int) {
	t.Helper()
	to := pcAddrPort(c)
	p, got := bytes.Repeat([]byte{'o'}, 1000), make([]byte, 2048)
	pcDeadline(t, c)
	for i := range n {
		if _, err := a.WriteToAddrPort(p, to); err != nil {
			t.Fatal(err)
		}
		if _, _, err := c.ReadFromAddrPort(got); err != nil {
			t.Fatalf("datagram %d: %v", i, err)
		}
	}
}
