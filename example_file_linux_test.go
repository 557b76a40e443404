package ringpoll_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/ringpoll/ringpoll"
)

// Reading and writing a file through the event loops: on the io_uring
// engines each call is a request on a loop's ring, and the goroutine
// waits without holding an OS thread; a context bounds it.
func ExampleOpenFile() {
	dir, err := os.MkdirTemp("", "ringpoll-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	f, err := ringpoll.OpenFile(filepath.Join(dir, "records"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		log.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt([]byte("record 1|record 2|"), 0); err != nil {
		log.Fatal(err)
	}
	if err := f.SyncContext(context.Background(), true); err != nil { // fdatasync
		log.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	rec := make([]byte, 8)
	if _, err := f.ReadAtContext(ctx, rec, 9); err != nil {
		log.Fatal(err)
	}
	fmt.Println(string(rec))
	// Output: record 2
}
