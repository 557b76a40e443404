package ringpoll_test

import (
	"context"
	"fmt"
	"log"
	"net/netip"
	"time"

	"github.com/ringpoll/ringpoll"
)

// Reading and writing many datagrams per system call. The Packets a
// ReadBatch returns are views into the Batch, valid until it is read into
// again: nothing is allocated per datagram.
func ExamplePacketConn_ReadBatch() {
	srv, err := ringpoll.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	client, err := ringpoll.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()

	to := netip.MustParseAddrPort(srv.LocalAddr().String())
	out := []ringpoll.Packet{
		{Data: []byte("one"), Addr: to},
		{Data: []byte("two"), Addr: to},
		{Data: []byte("three"), Addr: to},
	}
	if _, err := client.WriteBatch(out); err != nil {
		log.Fatal(err)
	}

	batch, err := ringpoll.NewBatch(64, 2048)
	if err != nil {
		log.Fatal(err)
	}
	srv.SetReadDeadline(time.Now().Add(5 * time.Second))
	for got := 0; got < len(out); {
		in, err := srv.ReadBatch(batch)
		if err != nil {
			log.Fatal(err)
		}
		for _, p := range in {
			fmt.Printf("%s (%d bytes)\n", p.Data, p.Size)
		}
		got += len(in)
	}
	// Output:
	// one (3 bytes)
	// two (3 bytes)
	// three (5 bytes)
}

// A UDP echo server: the handler gets each batch read, and its replies
// leave together when it returns.
func ExampleNewPacketServer() {
	echo := ringpoll.PacketHandlerFunc(func(w *ringpoll.PacketWriter, in []ringpoll.Packet) {
		for _, p := range in {
			w.WriteTo(p.Data, p.Addr)
		}
	})
	srv, err := ringpoll.NewPacketServer(echo)
	if err != nil {
		log.Fatal(err)
	}
	pc, err := ringpoll.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	go srv.Serve(pc)
	defer srv.Shutdown(context.Background())

	c, err := ringpoll.DialPacket("udp4", pc.LocalAddr().String())
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	c.Write([]byte("ping"))
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 64)
	n, err := c.Read(buf)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s\n", buf[:n])
	// Output: ping
}
