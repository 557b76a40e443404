package poll

import (
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// EventFD is an event loop's wake-up eventfd. The loop owns it: it reads
// it, arms reads of it or puts it in an epoll set through FD, and closes
// it when it stops. Other goroutines Signal it, and one may do so after
// the loop closed it, having seen the loop asleep just before it woke and
// stopped: by then the descriptor's number may belong to another file (a
// connection's socket, whose peer would read the eight bytes), so Signal
// and Close exclude each other and a closed EventFD ignores Signal.
type EventFD struct {
	mu sync.Mutex
	fd int
}

// NewEventFD makes a non-blocking, close-on-exec eventfd.
func NewEventFD() (*EventFD, error) {
	fd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		return nil, os.NewSyscallError("eventfd", err)
	}
	return &EventFD{fd: fd}, nil
}

// FD returns the descriptor, for its owner only (-1 once closed).
func (e *EventFD) FD() int { return e.fd }

// Signal adds one to the counter, waking whatever waits on the
// descriptor; after Close it does nothing.
func (e *EventFD) Signal() {
	one := [8]byte{1}
	e.mu.Lock()
	if e.fd >= 0 {
		RawWrite(e.fd, one[:]) // EAGAIN (the counter is full) still wakes
	}
	e.mu.Unlock()
}

// Close closes the descriptor; later Signals do nothing.
func (e *EventFD) Close() {
	e.mu.Lock()
	if e.fd >= 0 {
		unix.Close(e.fd)
		e.fd = -1
	}
	e.mu.Unlock()
}
