// Package engines runs a test on every ringpoll engine, for the bench
// module's tests of real programs on ringpoll.
package engines

import (
	"testing"

	"github.com/ringpoll/ringpoll"
)

// Names are the engines every test runs on.
var Names = []string{"epoll", "uring", "uring-hybrid", "uring-reactor", "uring-sqpoll"}

// ForEach runs f as a subtest per engine, skipping the io_uring ones,
// with the reason, where io_uring cannot run.
func ForEach(t *testing.T, f func(t *testing.T, e ringpoll.Engine)) {
	for _, name := range Names {
		t.Run(name, func(t *testing.T) {
			e, err := ringpoll.ParseEngine(name)
			if err != nil {
				t.Fatal(err)
			}
			if e != ringpoll.EngineEpoll {
				if err := ringpoll.UringStatus(); err != nil {
					t.Skipf("io_uring unavailable: %v", err)
				}
			}
			f(t, e)
		})
	}
}
