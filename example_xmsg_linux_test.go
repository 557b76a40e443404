package ringpoll_test

import (
	"fmt"
	"log"
	"net"
	"time"

	"golang.org/x/net/ipv4"

	"github.com/ringpoll/ringpoll"
)

// x/net's batch form, which quic-go reads through when its conn has it
// (quic.Transport{Conn: pc.MessageConn()}): the datagrams land in the
// messages' buffers, and the PacketConn counts them.
func ExamplePacketConn_MessageConn() {
	pc, err := ringpoll.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	defer pc.Close()
	client, err := net.Dial("udp4", pc.LocalAddr().String())
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	for _, s := range []string{"one", "two"} {
		if _, err := client.Write([]byte(s)); err != nil {
			log.Fatal(err)
		}
	}

	mc := pc.MessageConn()
	ms := make([]ipv4.Message, 8)
	for i := range ms {
		ms[i].Buffers = [][]byte{make([]byte, 1500)}
	}
	mc.SetReadDeadline(time.Now().Add(5 * time.Second))
	for got := 0; got < 2; {
		n, err := mc.ReadBatch(ms, 0)
		if err != nil {
			log.Fatal(err)
		}
		for _, m := range ms[:n] {
			fmt.Printf("%s\n", m.Buffers[0][:m.N])
		}
		got += n
	}
	fmt.Println(pc.Stats().Packets)
	// Output:
	// one
	// two
	// 2
}
