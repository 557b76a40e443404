package ringpoll

// A length-prefixed frame codec written the way netpoll users write them,
// run as a Server's handler and as a client on every engine: Peek the
// header, Next (or Slice) the frame, and build the answer with Malloc and
// MallocAck, with WriteDirect between the parts of one Malloc, or in a
// LinkBuffer Appended to the connection's Writer; then Flush.

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"sync"
	"testing"
	"time"
)

// A frame: length n (4 bytes, big-endian, counting what follows), the way
// it is built and read (4 bytes), a sequence number (8 bytes), the
// payload, and the payload's CRC-32 (4 bytes). The server answers each
// frame with the same frame, rebuilt.
const (
	ncHead = 4 + 4 + 8 // length, mode, sequence number
	ncTail = 4         // CRC-32
)

// The modes: how a frame is written, and, for ncSlice, read.
const (
	ncMallocAck   = iota // Malloc more than needed, MallocAck the header, WriteBinary the payload
	ncWriteDirect        // one Malloc for header and CRC, the payload WriteDirect'ed between them
	ncAppend             // built in a LinkBuffer, Appended to the Writer
	ncSlice              // read with Slice, the frame's Reader released later
	ncModes
)

// ncWrite writes one frame to w, the way mode says.
func ncWrite(w *Writer, mode uint32, seq uint64, p []byte) error {
	head := func(b []byte) {
		binary.BigEndian.PutUint32(b, uint32(ncHead-4+len(p)+ncTail))
		binary.BigEndian.PutUint32(b[4:], mode)
		binary.BigEndian.PutUint64(b[8:], seq)
	}
	sum := crc32.ChecksumIEEE(p)
	switch mode {
	case ncMallocAck:
		before := w.MallocLen()
		b, err := w.Malloc(64) // room for a header of any size
		if err != nil {
			return err
		}
		head(b)
		if err := w.MallocAck(before + ncHead); err != nil {
			return err
		}
		w.WriteBinary(p)
		t, _ := w.Malloc(ncTail)
		binary.BigEndian.PutUint32(t, sum)
	case ncWriteDirect:
		b, err := w.Malloc(ncHead + ncTail)
		if err != nil {
			return err
		}
		if err := w.WriteDirect(p, ncTail); err != nil {
			return err
		}
		// Both parts filled after the insertion, through the slice
		// Malloc returned before it.
		head(b)
		binary.BigEndian.PutUint32(b[ncHead:], sum)
	case ncAppend:
		lb := NewLinkBuffer()
		b, _ := lb.Malloc(ncHead)
		head(b)
		lb.WriteBinary(p)
		for _, c := range binary.BigEndian.AppendUint32(nil, sum) {
			lb.WriteByte(c)
		}
		if err := w.Append(lb); err != nil {
			return err
		}
	default:
		b, _ := w.Malloc(ncHead)
		head(b)
		w.WriteBinary(p)
		w.WriteString(string(binary.BigEndian.AppendUint32(nil, sum)))
	}
	return nil
}

// ncFrame is a frame read: its payload, valid until release.
type ncFrame struct {
	mode    uint32
	seq     uint64
	payload []byte
	sum     uint32
	slice   *Reader // the frame's own Reader (ncSlice), or nil
}

// release releases the frame's own Reader, if it has one.
func (f *ncFrame) release() {
	if f.slice != nil {
		f.slice.Release()
	}
}

// ncRead reads one frame from r: Peek the header, then Next the frame, or
// Slice it (ncSlice frames) and read it from its own Reader. A frame that
// has not arrived whole fails as r does (ErrWouldBlock inline), consuming
// nothing.
func ncRead(r *Reader) (ncFrame, error) {
	h, err := r.Peek(8)
	if err != nil {
		return ncFrame{}, err
	}
	n := int(binary.BigEndian.Uint32(h))
	f := ncFrame{mode: binary.BigEndian.Uint32(h[4:])}
	if n < ncHead-4+ncTail || f.mode >= ncModes {
		return ncFrame{}, fmt.Errorf("bad frame header: length %d, mode %d", n, f.mode)
	}
	var b []byte
	if f.mode == ncSlice {
		if f.slice, err = r.Slice(4 + n); err != nil {
			return ncFrame{}, err
		}
		// Read in parts: the frame's Reader reads on its own.
		if err = f.slice.Skip(8); err == nil {
			var seq []byte
			if seq, err = f.slice.Next(8); err == nil {
				f.seq = binary.BigEndian.Uint64(seq)
				b, err = f.slice.Next(n - ncHead + 4)
			}
		}
		if err != nil {
			f.slice.Release()
			return ncFrame{}, fmt.Errorf("reading a sliced frame: %w", err)
		}
	} else {
		if b, err = r.Next(4 + n); err != nil {
			return ncFrame{}, err
		}
		f.seq = binary.BigEndian.Uint64(b[8:])
		b = b[ncHead:]
	}
	f.payload = b[:len(b)-ncTail]
	f.sum = binary.BigEndian.Uint32(b[len(b)-ncTail:])
	if got := crc32.ChecksumIEEE(f.payload); got != f.sum {
		f.release()
		return ncFrame{}, fmt.Errorf("frame %d: CRC %08x, header says %08x", f.seq, got, f.sum)
	}
	return f, nil
}

// ncHandler answers frames as they come, flushing after each; inline it
// returns ErrWouldBlock at a frame not yet whole. Frames read with Slice
// are kept until the end of the call, past the Reader's Release and the
// reads after it, and checked again before they are released. Errors
// other than the end of input and ErrWouldBlock go to errs.
func ncHandler(errs chan<- error) Handler {
	return func(ctx context.Context, c *Conn) (err error) {
		r, w := c.Reader(), c.Writer()
		var kept []ncFrame
		defer func() {
			r.Release()
			for _, f := range kept {
				if crc32.ChecksumIEEE(f.payload) != f.sum {
					err = fmt.Errorf("frame %d read with Slice changed before its Release", f.seq)
				}
				f.release()
			}
			if err != nil && err != io.EOF && !errors.Is(err, ErrWouldBlock) {
				select {
				case errs <- err:
				default:
				}
			}
		}()
		for r.Len() > 0 {
			f, err := ncRead(r)
			if err != nil {
				return err
			}
			if err := ncWrite(w, f.mode, f.seq, f.payload); err != nil {
				return err
			}
			if err := w.Flush(); err != nil {
				return err
			}
			if f.slice != nil {
				kept = append(kept, f)
			}
		}
		return nil
	}
}

// ncSizes are the payload sizes the frames cycle through, each with every
// mode: around the 4 KiB of a provided buffer and a pooled node, the
// WriteBinary threshold, and well past them.
var ncSizes = []int{0, 1, 17, 100, 4000, 4080, 4095, 4096, 4097, 8192, 9000, 33000, 70000, 150000, 3}

// ncPayload is frame seq's payload.
func ncPayload(seq int) []byte {
	return tsRandom(uint64(1000+seq), ncSizes[seq/ncModes%len(ncSizes)])
}

// TestNetpollCodec runs the codec as a Server's handler (on a pooled
// goroutine, and inline) and as a ringpoll client on every engine. The
// client pipelines every frame, flushing every few, while it reads the
// answers, and checks every byte; at the end every provided buffer is back
// in its ring, none retired.
func TestNetpollCodec(t *testing.T) {
	const frames = ncModes * 15 * 2 // every size with every mode, twice
	forEachEngine(t, func(t *testing.T, e Engine) {
		for _, style := range []tsStyle{tsHandler, tsInline} {
			t.Run(string(style), func(t *testing.T) {
				errs := make(chan error, 1)
				var opts []Option
				if style == tsInline {
					opts = append(opts, WithInlineHandler())
				}
				ln := listen(t, e, "tcp")
				retired := ltRetired(ln)
				srv := tsServeHandler(t, ln, ncHandler(errs), opts...)
				c := tsDialRing(t, e, "tcp", ln.Addr().String())
				c.SetDeadline(time.Now().Add(tsTimeout))

				var wg sync.WaitGroup
				wg.Add(1)
				werr := make(chan error, 1)
				go func() {
					defer wg.Done()
					w := c.Writer()
					for seq := range frames {
						if err := ncWrite(w, uint32(seq%ncModes), uint64(seq), ncPayload(seq)); err != nil {
							werr <- err
							return
						}
						if seq%3 == 2 || seq == frames-1 {
							if err := w.Flush(); err != nil {
								werr <- err
								return
							}
						}
					}
					werr <- nil
				}()
				if err := ncClientRead(c, frames); err != nil {
					select {
					case serr := <-errs:
						t.Errorf("server: %v", serr)
					default:
					}
					t.Fatal(err)
				}
				wg.Wait()
				if err := <-werr; err != nil {
					t.Fatalf("client write: %v", err)
				}
				c.Close()
				srv.stop()
				select {
				case err := <-errs:
					t.Fatalf("server: %v", err)
				default:
				}
				ufBuffersBack(t, ln)
				if n := ltRetired(ln) - retired; n != 0 {
					t.Fatalf("%d provided buffers retired: a Slice's memory was not released", n)
				}
			})
		}
	})
}

// ncClientRead reads and checks the answers to frames frames. Frames read
// with Slice are released two frames later, after the connection's Reader
// released and read on.
func ncClientRead(c *Conn, frames int) error {
	r := c.Reader()
	var pending []ncFrame
	defer func() {
		for _, f := range pending {
			f.release()
		}
	}()
	for seq := range frames {
		f, err := ncRead(r)
		if err != nil {
			return fmt.Errorf("reading answer %d: %w", seq, err)
		}
		want := ncPayload(seq)
		if f.seq != uint64(seq) || f.mode != uint32(seq%ncModes) || !bytes.Equal(f.payload, want) {
			f.release()
			return fmt.Errorf("answer %d: seq %d mode %d, %d payload bytes differ from byte %d",
				seq, f.seq, f.mode, len(f.payload), firstDiff(f.payload, want))
		}
		r.Release()
		if f.slice != nil {
			pending = append(pending, f)
		}
		for len(pending) > 0 && pending[0].seq+2*ncModes <= uint64(seq) {
			old := pending[0]
			if !bytes.Equal(old.payload, ncPayload(int(old.seq))) {
				return fmt.Errorf("answer %d, read with Slice, changed before its Release", old.seq)
			}
			old.release()
			pending = pending[1:]
		}
	}
	return nil
}
