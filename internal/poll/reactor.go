package poll

import "io"

// Helpers for reactor loops (epoll, uring-reactor): the loop learns that a
// socket is readable or writable and makes the read and send syscalls
// itself.

const (
	// ReadSize is the smallest read a reactor makes; nodes grow for bulk
	// streams.
	ReadSize = 4096
	// ReadBudget bounds what one connection reads per loop turn, so a
	// sender that keeps pace with its reader (never EAGAIN, never the
	// high-water mark) cannot starve the loop's other connections.
	ReadBudget = 1 << 20
)

// ReadReady reads fd until EAGAIN, input backpressure, end of input or
// ReadBudget bytes. With short set, a short read ends it too: an
// edge-triggered poller reports data that arrives later, and the event had
// no hang-up that a read must still see. It reports whether the budget ran
// out with the socket maybe still readable: the loop must come back to fd
// by itself, since no new edge will come.
func ReadReady(fd *FD, short bool, st *Stats) (again bool) {
	return readReady(fd, short, false, false, st)
}

// ReadOrLeave is ReadReady for an epoll loop, which leaves the read to
// fd's blocked reader where inputSpaceOrLeave says (mayLeave: the loop may
// leave reads this turn).
func ReadOrLeave(fd *FD, short, mayLeave bool, st *Stats) (again bool) {
	return readReady(fd, short, true, mayLeave, st)
}

func readReady(fd *FD, short, ask, mayLeave bool, st *Stats) (again bool) {
	if fd.Detached() {
		return false
	}
	got := false
	for budget, burst := ReadBudget, 0; ; {
		var p []byte
		if ask {
			ask = false
			var left bool
			if p, left = fd.inputSpaceOrLeave(ReadSize, !short, mayLeave); left {
				return false
			}
		} else {
			p = fd.InputSpace(ReadSize)
		}
		if p == nil {
			break
		}
		n, err := Read(fd.Sysfd, p)
		if n > 0 {
			got = true
			burst += n
			st.BytesIn.Add(uint64(n))
			if !fd.InputCommit(n, burst) || (short && n < len(p)) {
				break
			}
			if budget -= n; budget <= 0 {
				again = true
				break
			}
			continue
		}
		if IsAgain(err) {
			break
		}
		if err == nil {
			err = io.EOF
		}
		fd.InputError(err)
		got = true
		break
	}
	if got {
		fd.InputReady()
	}
	return again
}

// SendQueued sends fd's queued output with sendmsg until it is empty, the
// socket is full, or a send fails. It reports whether the socket was full:
// the loop must wait for writability and call it again. iov and vecs are
// the loop's scratch.
func SendQueued(fd *FD, iov *[][]byte, vecs *Iovecs, st *Stats) (full bool) {
	for {
		*iov = fd.OutputSlices((*iov)[:0], len(vecs))
		if len(*iov) == 0 {
			return false
		}
		n, err := Sendv(fd.Sysfd, *iov, vecs)
		clear(*iov)
		if IsAgain(err) {
			return true
		}
		if err != nil {
			fd.OutputError(err)
			return false
		}
		st.BytesOut.Add(uint64(n))
		if fd.OutputSent(n) {
			return false
		}
	}
}
