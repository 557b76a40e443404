// Package uring is a small pure-Go binding (no cgo) over the io_uring
// system calls: io_uring_setup, io_uring_enter and io_uring_register. Names
// follow liburing: a Ring is struct io_uring, GetSQE is io_uring_get_sqe,
// (*SQE).PrepRecvMultishot is io_uring_prep_recv_multishot, and so on.
//
// The package only maps the kernel interface; policy (which flags, which
// ops, who owns a ring, how an enter meets the Go scheduler, when a loop
// sleeps) belongs to the engines in internal/poll/uringp. Of the two ways
// into the kernel, Ring.Enter is a blocking system call as the scheduler
// sees it and Ring.EnterRaw is not; which one a call takes is the
// caller's choice.
//
// # Threads
//
// A ring set up with SetupSingleIssuer may only be entered by the thread
// that created it: other threads get EEXIST, from io_uring_enter and from
// io_uring_register alike. With SetupDeferTaskrun,
// completions run only when that thread calls Enter with EnterGetEvents.
// Callers lock the creating goroutine to its thread (runtime.LockOSThread)
// for the ring's whole life.
//
// # Memory
//
// The kernel reads and writes ring memory concurrently with us. Every access
// to a word the other side writes is an atomic (Go's atomics are
// sequentially consistent, so each is at least the acquire or release that
// liburing uses); the comment at each one says what it orders. Memory the
// kernel fills asynchronously (provided buffers, buffer rings) must not be
// Go heap memory: BufRing and Arena map it with mmap. A Go pointer never
// goes into user_data.
//
// The package is little-endian only (amd64, arm64), because the buffer
// ring's 16-bit tail is published with a 32-bit atomic store.
package uring
