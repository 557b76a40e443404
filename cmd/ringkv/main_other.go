//go:build !linux

package main

import (
	"fmt"
	"os"
)

// main says why ringkv does not run here: ringpoll's engines need Linux.
func main() {
	fmt.Fprintln(os.Stderr, "ringkv: needs Linux (ringpoll's engines run only there)")
	os.Exit(1)
}
