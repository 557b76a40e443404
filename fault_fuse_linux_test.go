package ringpoll

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ringpoll/ringpoll/internal/poll/uringp"
)

// Failing reads, from a file system the test serves itself: a FUSE mount
// (/dev/fuse) with one regular file, "bad", every read of which fails
// with EIO, as a disk's bad sector makes a read fail. The kernel here has
// neither device-mapper's error target nor the block layer's fault
// injection (fail_make_request), which would fail a real device; FUSE
// fails the same calls (pread, io_uring READ, splice, sendfile) at the
// same place, the file system's read, and needs only /dev/fuse and
// CAP_SYS_ADMIN. The server speaks the few requests a lookup, an open, a
// read and a close need (include/uapi/linux/fuse.h, protocol 7.31) and
// answers ENOSYS to the rest.

// The server runs in a child process, this test binary started again
// with fuseServerEnv set, never in a goroutine of the test process: a
// thread of the test process asleep in the file system must not wait on
// a goroutine of the same process. Such a thread holds up a
// stop-the-world until the file system answers, and an exiting process
// closes its files (FUSE flushes them) before its goroutines could answer.

// FUSE opcodes and sizes.
const (
	fuseLookup      = 1
	fuseForget      = 2
	fuseGetattr     = 3
	fuseOpen        = 14
	fuseRead        = 15
	fuseRelease     = 18
	fuseFlush       = 25
	fuseInit        = 26
	fuseInterrupt   = 36
	fusePoll        = 40
	fuseBatchForget = 42

	fuseInHeader  = 40 // struct fuse_in_header
	fuseOutHeader = 16 // struct fuse_out_header
	fuseAttrSize  = 88 // struct fuse_attr

	fuseBadSize = 1 << 20 // the bad file's length
)

// The child server's environment and descriptors.
const (
	fuseServerEnv = "RINGPOLL_TEST_FUSE_SERVER" // "serve", or "hold": hold the first poll or read
	fuseDevFD     = 3                           // /dev/fuse, mounted
	fuseHeldFD    = 4                           // the server writes a byte here when it holds a request
	fuseReleaseFD = 5                           // and answers it once a byte comes here
)

// fuseHoldLimit bounds a hold: a test process that cannot release the
// request (the bug TestFileReadSleepingFS looks for) must not hang. The
// server then answers anyway and says so on stderr, which fails the test.
// It is no measure of speed: a test process that can run at all releases
// the request as soon as its goroutine is scheduled, and a minute is far
// beyond that on any machine; one that cannot would never release it.
const fuseHoldLimit = time.Minute

func init() {
	if mode := os.Getenv(fuseServerEnv); mode != "" {
		os.Exit(fuseServe(mode == "hold"))
	}
}

// faultyMount is a mounted failing file system and its server process.
type faultyMount struct {
	dir     string
	held    *os.File // the server's notices of a held request
	release *os.File // where the test releases it
}

// mountFaulty mounts the failing file system on a new directory, served
// by a child process; the cleanup unmounts it and reports what the server
// could not answer. With hold, the server holds the first poll or read
// request until the test calls release. It skips the test when the
// machine cannot mount FUSE.
func mountFaulty(t *testing.T, hold bool) *faultyMount {
	t.Helper()
	fd, err := unix.Open("/dev/fuse", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Skipf("no failing device to read from: opening /dev/fuse: %v (the kernel has no device-mapper error target or fail_make_request either)", err)
	}
	dev := os.NewFile(uintptr(fd), "/dev/fuse")
	defer dev.Close() // the child has its own copy
	m := &faultyMount{dir: t.TempDir()}
	opts := fmt.Sprintf("fd=%d,rootmode=40000,user_id=%d,group_id=%d", fd, os.Getuid(), os.Getgid())
	if err := unix.Mount("ringpoll-faulty", m.dir, "fuse", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		t.Skipf("no failing device to read from: mounting FUSE: %v (needs CAP_SYS_ADMIN)", err)
	}
	heldR, heldW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	releaseR, releaseW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	m.held, m.release = heldR, releaseW
	mode := "serve"
	if hold {
		mode = "hold"
	}
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), fuseServerEnv+"="+mode)
	cmd.ExtraFiles = []*os.File{dev, heldW, releaseR} // fds 3, 4, 5
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdin, err := cmd.StdinPipe() // the child ends when it closes
	if err == nil {
		err = cmd.Start()
	}
	heldW.Close()
	releaseR.Close()
	if err != nil {
		unix.Unmount(m.dir, unix.MNT_DETACH)
		heldR.Close()
		releaseW.Close()
		t.Fatalf("starting the FUSE server: %v", err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(m.dir, 0); err != nil {
			t.Errorf("unmounting the FUSE test mount: %v", err)
			unix.Unmount(m.dir, unix.MNT_DETACH)
		}
		stdin.Close()
		if err := cmd.Wait(); err != nil {
			t.Errorf("FUSE server: %v", err)
		}
		heldR.Close()
		releaseW.Close()
		if stderr.Len() > 0 {
			t.Errorf("FUSE server: %s", stderr.Bytes())
		}
	})
	return m
}

// waitHeld returns once the server holds a request.
func (m *faultyMount) waitHeld(t *testing.T) {
	t.Helper()
	if _, err := m.held.Read(make([]byte, 1)); err != nil {
		t.Fatalf("waiting for the FUSE server to hold a request: %v", err)
	}
}

// releaseHeld lets the server answer the request it holds.
func (m *faultyMount) releaseHeld(t *testing.T) {
	t.Helper()
	if _, err := m.release.Write([]byte{1}); err != nil {
		t.Fatalf("releasing the FUSE server's request: %v", err)
	}
}

// fuseServer answers the kernel's requests in the child process.
type fuseServer struct {
	hold bool // hold the next poll or read until released
}

// fuseServe is the child process: it serves /dev/fuse until the mount
// goes away or the test process does (its stdin closes), and returns the
// exit code. What it cannot answer it writes to stderr.
func fuseServe(hold bool) int {
	go func() {
		io.Copy(io.Discard, os.Stdin)
		os.Exit(0) // the test process ended without unmounting
	}()
	s := &fuseServer{hold: hold}
	buf := make([]byte, 256<<10) // over max_write plus headers, as the kernel wants
	for {
		n, err := unix.Read(fuseDevFD, buf)
		switch {
		case err == unix.EINTR || err == unix.ENOENT: // ENOENT: interrupted meanwhile
			continue
		case err != nil:
			return 0 // unmounted (ENODEV)
		case n < fuseInHeader:
			continue
		}
		s.handle(buf[:n])
	}
}

// handle answers one request.
func (s *fuseServer) handle(req []byte) {
	ne := binary.NativeEndian
	op := ne.Uint32(req[4:])
	unique := ne.Uint64(req[8:])
	node := ne.Uint64(req[16:])
	body := req[fuseInHeader:]
	if s.hold && (op == fusePoll || op == fuseRead) {
		s.hold = false
		s.holdUntilReleased()
	}
	switch op {
	case fuseForget, fuseBatchForget, fuseInterrupt:
		return // no reply; an interrupted read fails anyway
	case fuseInit:
		out := make([]byte, 64) // struct fuse_init_out
		ne.PutUint32(out[0:], 7)
		ne.PutUint32(out[4:], 31)
		ne.PutUint32(out[8:], ne.Uint32(body[8:])) // max_readahead as asked
		ne.PutUint32(out[20:], 128<<10)            // max_write
		s.reply(unique, 0, out)
	case fuseLookup:
		name := string(body)
		if i := bytes.IndexByte(body, 0); i >= 0 {
			name = string(body[:i])
		}
		if node != 1 || name != "bad" {
			s.reply(unique, -int32(syscall.ENOENT), nil)
			return
		}
		out := make([]byte, 40+fuseAttrSize) // struct fuse_entry_out
		ne.PutUint64(out[0:], 2)             // nodeid
		ne.PutUint64(out[16:], 3600)         // entry_valid
		ne.PutUint64(out[24:], 3600)         // attr_valid
		putFuseAttr(out[40:], 2)
		s.reply(unique, 0, out)
	case fuseGetattr:
		out := make([]byte, 16+fuseAttrSize) // struct fuse_attr_out
		ne.PutUint64(out[0:], 3600)
		putFuseAttr(out[16:], node)
		s.reply(unique, 0, out)
	case fuseOpen:
		s.reply(unique, 0, make([]byte, 16)) // struct fuse_open_out: fh 0, no flags
	case fuseRead:
		s.reply(unique, -int32(syscall.EIO), nil)
	case fuseRelease, fuseFlush:
		s.reply(unique, 0, nil)
	default: // fusePoll among them: the kernel then polls the file as always ready
		s.reply(unique, -int32(syscall.ENOSYS), nil)
	}
}

// holdUntilReleased tells the test a request is held and waits for its
// release, for at most fuseHoldLimit.
func (s *fuseServer) holdUntilReleased() {
	if _, err := unix.Write(fuseHeldFD, []byte{1}); err != nil {
		fmt.Fprintf(os.Stderr, "telling the test of a held request: %v\n", err)
		return
	}
	fds := []unix.PollFd{{Fd: fuseReleaseFD, Events: unix.POLLIN}}
	for {
		n, err := unix.Poll(fds, int(fuseHoldLimit/time.Millisecond))
		switch {
		case err == unix.EINTR:
			continue
		case err != nil:
			fmt.Fprintf(os.Stderr, "waiting for the test to release a request: %v\n", err)
		case n == 0:
			fmt.Fprintf(os.Stderr, "held a request for %v and the test never released it: no goroutine of the test process ran while a thread of it waited on this file system\n", fuseHoldLimit)
		}
		return
	}
}

// putFuseAttr fills a struct fuse_attr for node 1 (the root directory) or
// 2 (the bad file).
func putFuseAttr(b []byte, node uint64) {
	ne := binary.NativeEndian
	ne.PutUint64(b[0:], node) // ino
	mode := uint32(unix.S_IFDIR | 0o755)
	if node == 2 {
		ne.PutUint64(b[8:], fuseBadSize)      // size
		ne.PutUint64(b[16:], fuseBadSize/512) // blocks
		mode = unix.S_IFREG | 0o644
	}
	ne.PutUint32(b[60:], mode)
	ne.PutUint32(b[64:], 1) // nlink
	ne.PutUint32(b[68:], uint32(os.Getuid()))
	ne.PutUint32(b[72:], uint32(os.Getgid()))
	ne.PutUint32(b[80:], 4096) // blksize
}

func (s *fuseServer) reply(unique uint64, errno int32, body []byte) {
	out := make([]byte, fuseOutHeader+len(body))
	ne := binary.NativeEndian
	ne.PutUint32(out[0:], uint32(len(out)))
	ne.PutUint32(out[4:], uint32(errno))
	ne.PutUint64(out[8:], unique)
	copy(out[fuseOutHeader:], body)
	if _, err := unix.Write(fuseDevFD, out); err != nil && err != unix.ENOENT {
		// ENOENT: the request was interrupted meanwhile.
		fmt.Fprintf(os.Stderr, "reply to %d: %v\n", unique, err)
	}
}

// TestFileReadEIO: a read the file system fails returns EIO in an
// *os.PathError, on every engine and by every way of reading: ReadAt
// (the page-cache try, then the ring) and Read (through the ring on the
// io_uring engines).
func TestFileReadEIO(t *testing.T) {
	dir := mountFaulty(t, false).dir
	forEachEngine(t, func(t *testing.T, e Engine) {
		name := filepath.Join(dir, "bad")
		f := fileOpen(t, e, name, os.O_RDONLY)
		reads := []struct {
			name string
			read func(p []byte) (int, error)
		}{
			{"ReadAt", func(p []byte) (int, error) { return f.ReadAt(p, 8192) }},
			{"Read", f.Read},
		}
		before := fileSQEs(f)
		for _, r := range reads {
			n, err := r.read(make([]byte, 4096))
			var pe *os.PathError
			if n != 0 || !errors.Is(err, syscall.EIO) || !errors.As(err, &pe) || pe.Path != name {
				t.Errorf("%s of a failing file = %d, %v; want 0 and EIO in an *os.PathError naming %s", r.name, n, err, name)
			}
		}
		if e != EngineEpoll && fileSQEs(f) == before {
			t.Error("no read went to the ring")
		}
	})
}

// TestConnSendFileEIO: a file range whose read fails ends SendFile with
// EIO, on every engine, in a *net.OpError; the connection stays usable
// for what comes after.
func TestConnSendFileEIO(t *testing.T) {
	dir := mountFaulty(t, false).dir
	forEachEngine(t, func(t *testing.T, e Engine) {
		f := fileOpen(t, e, filepath.Join(dir, "bad"), os.O_RDONLY)
		c, peer := tsPair(t, e, "tcp", tsDialed)
		n, err := c.SendFile(f, 0, 64<<10)
		var op *net.OpError
		if n != 0 || !errors.Is(err, syscall.EIO) || !errors.As(err, &op) || op.Op != "sendfile" {
			t.Fatalf("SendFile of a failing file = %d, %v; want 0 and EIO in a *net.OpError", n, err)
		}
		if _, err := c.Write([]byte("still here")); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, 10)
		if _, err := io.ReadFull(peer, got); err != nil || string(got) != "still here" {
			t.Fatalf("after the failed SendFile the peer read %q, %v", got, err)
		}
	})
}

// TestFileReadSleepingFS: a file read may sleep in the thread that
// submits it to the ring (io_uring first issues it inline, and polls a
// FUSE file through the file system's server to see whether it can);
// the rest of the program must run meanwhile. With one P, the server
// holds that first request until the test goroutine, which can run only
// if the submitting thread gave its P up, releases it. Before the ring
// told the scheduler about such enters, the loop's thread slept holding
// the P, and a stop-the-world (a garbage collection) then waited on a
// file system served by the same process forever.
func TestFileReadSleepingFS(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e Engine) {
		m := mountFaulty(t, true)
		f := fileOpen(t, e, filepath.Join(m.dir, "bad"), os.O_RDONLY)
		defer func(procs int) {
			runtime.GOMAXPROCS(procs)
			uringp.RefreshProcs()
		}(runtime.GOMAXPROCS(1))
		uringp.RefreshProcs() // no loop may nap on the one P
		done := make(chan error, 1)
		go func() {
			_, err := f.ReadAt(make([]byte, 4096), 0)
			done <- err
		}()
		m.waitHeld(t)
		m.releaseHeld(t)
		if err := <-done; !errors.Is(err, syscall.EIO) {
			t.Errorf("read of a failing file after a held request: %v; want EIO", err)
		}
		// The server reports, at cleanup, a hold the test did not end.
	})
}
