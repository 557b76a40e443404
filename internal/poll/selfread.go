package poll

// A reader blocked for input reads its socket itself. An epoll loop that
// finds the socket of such a reader readable in a long turn leaves the
// read to it (ReadOrLeave) rather than read ahead of it: the socket is
// read when its reader wants the bytes, as with net's poller, not as soon
// as they arrive, when a read may make the kernel send an acknowledgement
// of its own that a later one would leave to ride on the reply. While the
// reader reads, the loop does not; readiness that comes meanwhile is left
// to the reader too, and a reader that stops waiting (a deadline,
// StopWaits) hands a read it was left back to the loop.

// inBits are an FD's input flags kept in one byte: StopWaits', input's
// end, and those of a reader that reads its socket itself. All are guarded
// by inMu.
type inBits uint8

const (
	// inStopped: reads fail rather than wait for input (StopWaits).
	inStopped inBits = 1 << iota
	// selfWaiting: a reader waits for input in lockInput.
	selfWaiting
	// selfReady: the loop left the reader a read it did not make.
	selfReady
	// selfHup: a read left to the reader came with a hang-up (or from
	// Resume): read until EAGAIN, not until the first short read.
	selfHup
	// selfReading: the reader is reading the socket; the loop must not.
	selfReading
	// inEnded: input ended, with io.EOF or with the read error the
	// waitState keeps (inputErr).
	inEnded
)

// inputSpaceOrLeave is InputSpace for an epoll loop about to read fd, which
// became readable (hup: with a hang-up, or the loop was asked to read
// again), unless the read is fd's reader's: the reader is reading or was
// left a read already, or (if mayLeave) it waits for input and none is
// buffered (nor is input paused, ended, lent or stopped). Then it tells
// the reader and reports left.
func (fd *FD) inputSpaceOrLeave(min int, hup, mayLeave bool) (p []byte, left bool) {
	fd.inMu.Lock()
	left = fd.inBits&(selfReady|selfReading) != 0 ||
		mayLeave && !hup && fd.inBits&selfWaiting != 0 && !fd.NoBlock && (fd.in == nil || fd.in.Len() == 0) &&
			!fd.inPaused && !fd.inLent && fd.inBits&inStopped == 0 && fd.inBits&inEnded == 0
	if left {
		fd.inBits |= selfReady
		if hup {
			fd.inBits |= selfHup
		}
	} else if !fd.inPaused && fd.inBits&inEnded == 0 && !fd.Closing() {
		p = fd.input().WriteSpace(min)
	}
	fd.inMu.Unlock()
	if left {
		hook(HookReadLeft, fd)
		fd.signalReadable()
	}
	return p, left
}

// readSelf makes the read the loop left fd's reader, on the reader's
// goroutine. Called with inMu held, it returns without it.
func (fd *FD) readSelf() {
	short := fd.inBits&selfHup == 0
	fd.inBits = fd.inBits&^(selfReady|selfHup) | selfReading
	fd.inMu.Unlock()
	hook(HookSelfRead, fd)
	again := false
	if fd.acquire(lifeSys) {
		again = ReadReady(fd, short, fd.Loop.Stats())
		fd.put(lifeSys)
	}
	fd.inMu.Lock()
	fd.inBits &^= selfReading
	fd.inMu.Unlock()
	if again {
		fd.Loop.Resume(fd) // the read budget ran out: the loop reads on
	}
}

// readerGone is called by a reader that stops waiting without its input:
// a read the loop left it goes back to the loop, since no new readiness
// will come for bytes already there.
func (fd *FD) readerGone() {
	fd.inMu.Lock()
	back := fd.inBits&selfReady != 0
	fd.inBits &^= selfWaiting | selfReady | selfHup
	fd.inMu.Unlock()
	if back {
		fd.Loop.Resume(fd)
	}
}
