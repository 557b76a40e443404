//go:build linux

package uring

import (
	"fmt"
	"os"
	"runtime"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// BufRing is a provided-buffer ring (IORING_REGISTER_PBUF_RING, 5.19): the
// kernel takes a buffer from it for each completion of a request with
// SqeBufferSelect in its group. Only one goroutine may add buffers.
type BufRing struct {
	ring    *Ring
	mem     []byte // the entries; page-aligned mmap memory
	entries []BufRingEntry
	mask    uint16
	tail    uint16 // next slot to fill; published by Advance
	Bgid    uint16
}

// NewBufRing registers a buffer ring of n entries (a power of two, at most
// 32768) as group bgid of ring r. It starts empty: Add buffers, then
// Advance.
func NewBufRing(r *Ring, n int, bgid uint16) (*BufRing, error) {
	return NewBufRingFlags(r, n, bgid, 0)
}

// NewBufRingFlags is NewBufRing with registration flags (PbufRingInc), as
// liburing's io_uring_setup_buf_ring takes them. A kernel that does not
// know a flag fails with EINVAL.
func NewBufRingFlags(r *Ring, n int, bgid, flags uint16) (*BufRing, error) {
	if n <= 0 || n > 1<<15 || n&(n-1) != 0 {
		return nil, fmt.Errorf("io_uring: buffer ring of %d entries: want a power of two up to 32768", n)
	}
	size := n * int(unsafe.Sizeof(BufRingEntry{}))
	mem, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE|unix.MAP_POPULATE)
	if err != nil {
		return nil, os.NewSyscallError("mmap", err)
	}
	reg := BufReg{RingAddr: uint64(uintptr(unsafe.Pointer(&mem[0]))), RingEntries: uint32(n), Bgid: bgid, Flags: flags}
	if _, err := register(r.fd, RegisterPbufRing, unsafe.Pointer(&reg), 1); err != nil {
		unix.Munmap(mem)
		return nil, os.NewSyscallError("io_uring_register(PBUF_RING)", err)
	}
	br := &BufRing{ring: r, mem: mem, mask: uint16(n - 1), Bgid: bgid}
	br.entries = unsafe.Slice((*BufRingEntry)(unsafe.Pointer(&mem[0])), n)
	return br, nil
}

// Add puts buffer b with id bid into the ring at offset positions past the
// unpublished tail (liburing's io_uring_buf_ring_add). b must be memory the
// garbage collector does not manage, such as an Arena's.
func (br *BufRing) Add(b []byte, bid uint16, offset int) {
	e := &br.entries[(br.tail+uint16(offset))&br.mask]
	e.Addr = uint64(uintptr(unsafe.Pointer(unsafe.SliceData(b))))
	e.Len = uint32(len(b))
	e.Bid = bid
}

// Advance publishes count added buffers to the kernel.
func (br *BufRing) Advance(count int) {
	br.tail += uint16(count)
	// The tail is the u16 at byte 14 of entry 0 (its Resv). Go has no
	// 16-bit atomic, so store the aligned u32 at byte 12: the tail in its
	// high half and entry 0's bid, unchanged, in its low half (the kernel
	// never writes a bid). Release: the entries' plain stores above are
	// visible before the tail that publishes them. Little-endian only.
	w := (*uint32)(unsafe.Pointer(&br.entries[0].Bid))
	atomic.StoreUint32(w, uint32(br.tail)<<16|uint32(br.entries[0].Bid))
}

// Head returns the kernel's head of the ring (IORING_REGISTER_PBUF_STATUS,
// 6.8): the buffers from Head to the published tail are still available.
func (br *BufRing) Head() (uint16, error) {
	st := BufStatus{BufGroup: uint32(br.Bgid)}
	if _, err := register(br.ring.fd, RegisterPbufStatus, unsafe.Pointer(&st), 1); err != nil {
		return 0, os.NewSyscallError("io_uring_register(PBUF_STATUS)", err)
	}
	return uint16(st.Head), nil
}

// Tail returns the published tail.
func (br *BufRing) Tail() uint16 { return br.tail }

// Close unregisters the ring and unmaps its entries. The ring's requests
// that select buffers must have ended. Registering is owner-only on a
// SINGLE_ISSUER ring, like entering: if the unregister fails (EEXIST from
// another thread) the entries stay mapped, since the kernel may still use
// them, and the error says why.
func (br *BufRing) Close() error {
	reg := BufReg{Bgid: br.Bgid}
	if _, err := register(br.ring.fd, UnregisterPbufRing, unsafe.Pointer(&reg), 1); err != nil {
		return os.NewSyscallError("io_uring_register(UNREGISTER_PBUF_RING)", err)
	}
	return unix.Munmap(br.mem)
}

// Arena is memory for the kernel to fill: count buffers of size bytes
// each, mapped anonymously, outside the Go heap, so the garbage collector
// neither scans nor frees it. Replace gives one buffer new memory, from
// the Go heap, for good.
type Arena struct {
	mem  []byte
	size int
	// repl[i], if set, is buffer i's memory since Replace, pinned by
	// pins[i]. Both are made on the first Replace.
	repl [][]byte
	pins []runtime.Pinner
}

// NewArena maps count buffers of size bytes.
func NewArena(count, size int) (*Arena, error) {
	mem, err := unix.Mmap(-1, 0, count*size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		return nil, os.NewSyscallError("mmap", err)
	}
	return &Arena{mem: mem, size: size}, nil
}

// Buf returns buffer i, with its full size as capacity.
func (a *Arena) Buf(i int) []byte {
	if a.repl != nil && a.repl[i] != nil {
		return a.repl[i]
	}
	return a.mem[i*a.size : (i+1)*a.size : (i+1)*a.size]
}

// Replace gives buffer i new memory, so that Buf(i) never returns its
// current memory again: someone may still read it. The new memory comes
// from the Go heap, pinned (runtime.Pinner) so that it stays put while the
// kernel may write it; memory that Replace took from a former replacement
// is unpinned, and the garbage collector frees it once nothing refers to
// it. The arena's own mapping is never reused for buffer i.
func (a *Arena) Replace(i int) {
	if a.repl == nil {
		a.repl = make([][]byte, a.Count())
		a.pins = make([]runtime.Pinner, a.Count())
	}
	a.pins[i].Unpin()
	m := make([]byte, a.size)
	a.pins[i].Pin(&m[0])
	a.repl[i] = m[:a.size:a.size]
}

// Index returns the buffer of the arena's own mapping that holds all of p
// (not empty), or false if p lies elsewhere, Go memory included.
func (a *Arena) Index(p []byte) (int, bool) {
	if len(p) == 0 || len(a.mem) == 0 {
		return 0, false
	}
	base := uintptr(unsafe.Pointer(unsafe.SliceData(a.mem)))
	at := uintptr(unsafe.Pointer(unsafe.SliceData(p)))
	if at < base || at-base > uintptr(len(a.mem)-len(p)) {
		return 0, false
	}
	first, last := (at-base)/uintptr(a.size), (at-base+uintptr(len(p))-1)/uintptr(a.size)
	return int(first), first == last
}

// Count returns the number of buffers.
func (a *Arena) Count() int { return len(a.mem) / a.size }

// Size returns the size of each buffer.
func (a *Arena) Size() int { return a.size }

// Free unmaps the arena and unpins its replacements. No slice of it may be
// used afterwards.
func (a *Arena) Free() error {
	for i := range a.pins {
		a.pins[i].Unpin()
	}
	a.repl, a.pins = nil, nil
	return unix.Munmap(a.mem)
}
