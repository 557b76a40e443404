package poll

// A reader may consume input without inMu, from a view: the readable bytes
// of the input's read node, which a locked call handed out with its result
// (NextView, PeekView). The bytes the FD would give next are, byte for
// byte, a prefix of the view, until someone else consumes or releases
// input, so a reader that is the only consumer may take them from the view
// and tell the FD how many it took (skip) with its next locked call. It
// saves two locked instructions per Peek or Next, the bulk of a pipelined
// request's own user-space cost. Until then the FD's input still holds
// the skipped bytes: Len counts them, Held too (as it counts consumed
// bytes until Release), and the loop, which only appends, never reads the
// read position. The view's memory is as safe as a Peek's: handed out
// with inHeld set, it is not recycled before a release.
//
// The reader must check ViewUsable before each use of its view, as a
// locked call checks Closing and the read deadline.

// ViewUsable reports whether a reader may take bytes from its view: fd is
// not closing and the read deadline has not passed (a locked call would
// fail then, whatever is buffered).
func (fd *FD) ViewUsable() bool {
	return !fd.Closing() && !fd.readExpired()
}

// NextView consumes skip bytes the reader took from its last view, then
// consumes and returns the next n bytes as Next does, with the new
// view: the readable bytes that follow them in their node (possibly
// none). On error nothing is consumed, skip included.
func (fd *FD) NextView(skip, n int) (b, view []byte, err error) {
	return fd.takeView(skip, n, true)
}

// PeekView consumes skip bytes the reader took from its last view, then
// returns the next n bytes as Peek does, with the new view, which
// starts with them when they lie in one node. On error nothing is
// consumed, skip included.
func (fd *FD) PeekView(skip, n int) (b, view []byte, err error) {
	return fd.takeView(skip, n, false)
}

// takeView is NextView (consume set) and PeekView.
func (fd *FD) takeView(skip, n int, consume bool) (b, view []byte, err error) {
	if err := fd.lockInput(skip + n); err != nil {
		return nil, nil, err
	}
	fd.skipTaken(skip)
	if n > 0 {
		if consume {
			b = fd.in.Next(n)
		} else {
			b = fd.in.Peek(n)
		}
	}
	view = fd.in.Front()
	if len(b) > 0 || len(view) > 0 {
		// The view is input memory too, whatever n was: Next(0) hands
		// it out as surely as Next(1).
		fd.inHeld = true
	}
	fd.unlockInput()
	return b, view, nil
}

// ReleaseSkip consumes skip bytes the reader took from its view, then
// releases as Release does.
func (fd *FD) ReleaseSkip(skip int) {
	fd.inMu.Lock()
	fd.skipTaken(skip)
	fd.releaseInput()
	fd.unlockInput()
}

// Consume consumes skip bytes the reader took from its view, without
// waiting or failing: for a reader that gives its view up before another
// call.
func (fd *FD) Consume(skip int) {
	if skip <= 0 {
		return
	}
	fd.inMu.Lock()
	fd.skipTaken(skip)
	fd.unlockInput()
}

// skipTaken consumes the skip bytes a reader took from its view; once fd
// was destroyed there are none left to consume. Called with inMu held.
func (fd *FD) skipTaken(skip int) {
	if skip = min(skip, fd.in.Len()); skip > 0 {
		fd.in.Skip(skip)
	}
}
