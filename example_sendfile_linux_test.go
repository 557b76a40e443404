package ringpoll_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/ringpoll/ringpoll"
)

// Serving a file range: the handler writes a header through the Writer,
// flushes it, and sends the range with SendFile, which follows the header
// on the wire; sendfile(2) moves it from the page cache to the socket.
func ExampleConn_SendFile() {
	dir, err := os.MkdirTemp("", "ringpoll-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	name := filepath.Join(dir, "page.txt")
	if err := os.WriteFile(name, []byte("...the body of the page..."), 0o600); err != nil {
		log.Fatal(err)
	}
	f, err := ringpoll.OpenFile(name, os.O_RDONLY, 0)
	if err != nil {
		log.Fatal(err)
	}
	defer f.Close()

	ln, err := ringpoll.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	srv, err := ringpoll.NewServer(func(ctx context.Context, c *ringpoll.Conn) error {
		r, w := c.Reader(), c.Writer()
		if _, err := r.Until('\n'); err != nil {
			return err
		}
		w.WriteString("body: ")
		if err := w.Flush(); err != nil {
			return err
		}
		_, err := c.SendFile(f, 3, 20) // bytes 3 to 22
		c.Write([]byte("\n"))
		return err
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
	fmt.Fprint(c, "GET\n")
	reply, err := c.Reader().Until('\n')
	if err != nil {
		log.Fatal(err)
	}
	fmt.Print(string(reply))
	// Output: body: the body of the page
}
