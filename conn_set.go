package ringpoll

// connSet is a Server's connections. Each Conn knows its place (srvIdx),
// so adding and removing one is a store or two; the places are chunks of
// connChunk pointers, so that growing the set never copies it and leaves
// no old array behind for the garbage collector, as a map or a slice
// grown by append would: ten thousand connections accepted in a burst
// otherwise leave tens of bytes each of freed memory that the process
// keeps resident (docs/RELIABILITY.md, memory per idle connection).
// Guarded by the Server's mu.
type connSet struct {
	chunks [][]*Conn
	n      int
}

const connChunk = 512

func (s *connSet) len() int { return s.n }

func (s *connSet) at(i int) *Conn { return s.chunks[i/connChunk][i%connChunk] }

func (s *connSet) set(i int, c *Conn) { s.chunks[i/connChunk][i%connChunk] = c }

// add puts c in the set.
func (s *connSet) add(c *Conn) {
	if s.n == len(s.chunks)*connChunk {
		s.chunks = append(s.chunks, make([]*Conn, connChunk))
	}
	s.set(s.n, c)
	c.srvIdx = int32(s.n) + 1
	s.n++
}

// remove takes c out of the set, if it is in it: the last connection
// moves into its place.
func (s *connSet) remove(c *Conn) {
	i := int(c.srvIdx) - 1
	if i < 0 || i >= s.n || s.at(i) != c {
		return
	}
	last := s.n - 1
	moved := s.at(last)
	s.set(i, moved)
	moved.srvIdx = int32(i) + 1
	s.set(last, nil)
	c.srvIdx = 0
	s.n--
	// Keep one empty chunk, so that a connection coming and going at a
	// chunk's edge does not make and drop one each time.
	if k := len(s.chunks); k > 1 && s.n <= (k-2)*connChunk {
		s.chunks[k-1] = nil
		s.chunks = s.chunks[:k-1]
	}
}

// appendTo appends the set's connections to dst.
func (s *connSet) appendTo(dst []*Conn) []*Conn {
	for i, ch := range s.chunks {
		n := min(connChunk, s.n-i*connChunk)
		if n <= 0 {
			break
		}
		dst = append(dst, ch[:n]...)
	}
	return dst
}
