package ringpoll_test

import (
	"bytes"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"path/filepath"

	"github.com/ringpoll/ringpoll"
)

// Serving files: http.ServeFile on a ringpoll listener sends the file with
// sendfile(2) through Conn.ReadFrom, as it does on a net listener; the
// listener's Stats count the bytes sent that way (ZeroCopyBytes).
func ExampleConn_ReadFrom() {
	dir, err := os.MkdirTemp("", "ringpoll-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	name := filepath.Join(dir, "page.txt")
	if err := os.WriteFile(name, bytes.Repeat([]byte("ringpoll "), 100000), 0o600); err != nil {
		log.Fatal(err)
	}

	ln, err := ringpoll.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	served := make(chan struct{}, 1)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.ServeFile(w, r, name)
		served <- struct{}{} // its sends are counted by now
	})}
	go srv.Serve(ln)
	defer srv.Close()

	sent := func() uint64 { return ln.Stats().ZeroCopyBytes }
	before := sent()
	tr := &http.Transport{} // no proxy
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Get("http://" + ln.Addr().String() + "/")
	if err != nil {
		log.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		log.Fatal(err)
	}
	<-served // the client can read the last bytes before the server counts them
	fmt.Println(len(body), sent() > before)
	// Output: 900000 true
}
