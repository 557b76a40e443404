//go:build linux

package ringpoll_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"net"

	"github.com/ringpoll/ringpoll"
)

// The net-style API: a Listener whose connections are plain net.Conns.
func ExampleListen() {
	ln, err := ringpoll.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		io.Copy(c, c) // echo until the client closes
	}()

	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	fmt.Fprint(c, "hello")
	reply := make([]byte, 5)
	io.ReadFull(c, reply)
	fmt.Println(string(reply))
	// Output: hello
}

// The netpoll-style API: a Server runs the handler when input arrives; the
// handler echoes through the nocopy Reader and Writer.
func ExampleNewServer() {
	ln, err := ringpoll.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	srv, err := ringpoll.NewServer(func(ctx context.Context, c *ringpoll.Conn) error {
		r, w := c.Reader(), c.Writer()
		line, err := r.Until('\n')
		if err != nil {
			return err
		}
		w.WriteString("echo: ")
		w.WriteBinary(line)
		return w.Flush()
	})
	if err != nil {
		log.Fatal(err)
	}
	go srv.Serve(ln)
	defer srv.Shutdown(context.Background())

	c, err := ringpoll.Dial("tcp", ln.Addr().String())
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	fmt.Fprint(c, "ping\n")
	reply, err := c.Reader().Until('\n')
	if err != nil {
		log.Fatal(err)
	}
	fmt.Print(string(reply))
	// Output: echo: ping
}

// An inline handler runs on the event loop, so it must not wait: Until on
// a line not yet whole fails with ErrWouldBlock, and the handler, returning
// it, is called again when more input arrives.
func ExampleWithInlineHandler() {
	ln, err := ringpoll.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	srv, err := ringpoll.NewServer(func(ctx context.Context, c *ringpoll.Conn) error {
		r, w := c.Reader(), c.Writer()
		for {
			line, err := r.Until('\n')
			if err != nil {
				return err // ErrWouldBlock: back to the loop until more comes
			}
			w.WriteString("echo: ")
			w.WriteBinary(line)
			if err := w.Flush(); err != nil {
				return err
			}
		}
	}, ringpoll.WithInlineHandler())
	if err != nil {
		log.Fatal(err)
	}
	go srv.Serve(ln)
	defer srv.Shutdown(context.Background())

	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	fmt.Fprint(c, "pi")
	fmt.Fprint(c, "ng\npong\n")
	reply := make([]byte, 22)
	io.ReadFull(c, reply)
	fmt.Print(string(reply))
	// Output:
	// echo: ping
	// echo: pong
}

// Choosing an engine by name, as a flag or config file would give it.
func ExampleParseEngine() {
	e, err := ringpoll.ParseEngine("epoll")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(e)
	_, err = ringpoll.ParseEngine("kqueue")
	fmt.Println(err)
	// Output:
	// epoll
	// ringpoll: unknown engine "kqueue" (valid: auto, epoll, uring, uring-hybrid, uring-reactor, uring-sqpoll)
}
