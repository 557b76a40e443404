package ringpoll_test

import (
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/ringpoll/ringpoll"
)

// Reading and writing a file through the event loops: on the io_uring
// engines each call is a request on a loop's ring, and the goroutine
// waits without holding an OS thread.
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
	if err := f.Sync(); err != nil {
		log.Fatal(err)
	}
	rec := make([]byte, 8)
	if _, err := f.ReadAt(rec, 9); err != nil {
		log.Fatal(err)
	}
	fmt.Println(string(rec))
	// Output: record 2
}
