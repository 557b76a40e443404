//go:build linux

package ringpoll

import (
	"errors"
	"net"
	"os"
	"testing"
	"time"
)

// TestDeadlineWakesBlockedReaders: readers blocked on a connection with no
// deadline wait on their wake-up token alone (poll's await); a read
// deadline set later, in the past or a little ahead, must still end every
// one of their reads with a timeout. Three readers share the connection,
// so the news must pass from the first woken to the others.
func TestDeadlineWakesBlockedReaders(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e Engine) {
		for _, ahead := range []time.Duration{-time.Second, 30 * time.Millisecond} {
			c, _ := tsPair(t, e, "tcp", tsAccepted)
			const readers = 3
			errs := make(chan error, readers)
			for range readers {
				go func() {
					_, err := c.Read(make([]byte, 16))
					errs <- err
				}()
			}
			// Wait until one has blocked; those that have not yet meet
			// the deadline at once, and the test asks the same of them.
			tsEventually(t, "a reader to block", c.fd.ReaderWaited)
			c.SetReadDeadline(time.Now().Add(ahead))
			for range readers {
				select {
				case err := <-errs:
					var ne net.Error
					if !errors.Is(err, os.ErrDeadlineExceeded) || !errors.As(err, &ne) || !ne.Timeout() {
						t.Errorf("deadline %v ahead: a blocked read returned %v, want a timeout", ahead, err)
					}
				case <-time.After(tsTimeout):
					t.Fatalf("deadline %v ahead: a blocked read did not return", ahead)
				}
			}
		}
	})
}
