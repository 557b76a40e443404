//go:build linux

// Command ringkv is the server of ringbench's key-value scenario (-kv,
// internal/kvproto): length-prefixed requests over TCP, each a get or a
// put of one 4 KiB record of a data file opened with O_DIRECT, so every
// request reaches the disk. Puts are acknowledged once an fsync covered
// them; one sync covers every put that arrived while the one before ran
// (group commit).
//
//	ringkv -addr 127.0.0.1:7100 -file /tmp/kv.dat -impl ring
//
// -impl picks the server:
//
//   - ring: network on ringpoll (a Server's pooled handlers) and the file
//     a ringpoll.File on the same engine, so reads, writes and syncs are
//     requests on the loops' rings, and a handler waiting for the disk
//     holds no OS thread;
//   - osfile: network on ringpoll, the file an os.File (pread, pwrite and
//     fsync on the handler's goroutine, a thread each while they wait);
//   - std: std net, a goroutine per connection, and an os.File;
//   - sendfile: as ring, but a get's record goes from the file to the
//     socket with Conn.SendFile (sendfile(2)).
//
// It logs the requests served and the syncs' batches when it exits, on
// SIGINT or SIGTERM.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/ringpoll/ringpoll"
	"github.com/ringpoll/ringpoll/internal/kvproto"
	"github.com/ringpoll/ringpoll/internal/rpcframe"
)

func main() {
	if err := run(os.Args[1:], nil, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "ringkv:", err)
		os.Exit(1)
	}
}

// store is the data file as a server reads and writes it: a
// *ringpoll.File or an *os.File.
type store interface {
	ReadAt(p []byte, off int64) (int, error)
	WriteAt(p []byte, off int64) (int, error)
	Sync() error
	Close() error
}

// server is one ringkv process.
type server struct {
	st      store
	records uint64
	commit  *committer
	file    *ringpoll.File // -impl sendfile
	gets    atomic.Uint64
	puts    atomic.Uint64
	errs    atomic.Uint64
	bufs    sync.Pool // aligned RecordSize buffers, for O_DIRECT
}

// run serves until a signal; ready, if set, is told the address (tests).
func run(args []string, ready func(net.Addr), logw io.Writer) error {
	fs := flag.NewFlagSet("ringkv", flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:7100", "address to listen on")
	file := fs.String("file", "", "the data file (internal/kvproto's records; ringbench -kv makes it)")
	impl := fs.String("impl", "ring", "ring, osfile, std or sendfile (see the command's documentation)")
	engineName := fs.String("engine", "uring", "ringpoll engine for the network and, with -impl ring or sendfile, the file")
	direct := fs.Bool("direct", true, "open the file with O_DIRECT (every request reaches the disk)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *file == "" {
		return errors.New("-file is missing")
	}
	engine, err := ringpoll.ParseEngine(*engineName)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(logw, nil))
	flag := os.O_RDWR
	if *direct {
		flag |= unix.O_DIRECT
	}
	s := &server{}
	s.bufs.New = func() any { return alignedRecord() }
	switch *impl {
	case "ring", "sendfile":
		f, err := ringpoll.OpenFile(*file, flag, 0, ringpoll.WithEngine(engine))
		if err != nil {
			return err
		}
		s.st, s.file = f, f
	case "osfile", "std":
		f, err := os.OpenFile(*file, flag, 0)
		if err != nil {
			return err
		}
		s.st = f
	default:
		return fmt.Errorf("-impl %q: want ring, osfile, std or sendfile", *impl)
	}
	defer s.st.Close()
	st, err := os.Stat(*file)
	if err != nil {
		return err
	}
	s.records = uint64(kvproto.Records(st.Size()))
	if s.records == 0 {
		return fmt.Errorf("-file %s holds no record", *file)
	}
	s.commit = newCommitter(s.st.Sync)
	defer s.commit.stop()

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	defer func() {
		batches, synced := s.commit.batches.Load(), s.commit.synced.Load()
		avg := 0.0
		if batches > 0 {
			avg = float64(synced) / float64(batches)
		}
		log.Info("ringkv served", "gets", s.gets.Load(), "puts", s.puts.Load(), "errors", s.errs.Load(),
			"syncs", batches, "puts_per_sync", fmt.Sprintf("%.1f", avg))
	}()
	if *impl == "std" {
		ln, err := net.Listen("tcp", *addr)
		if err != nil {
			return err
		}
		log.Info("ringkv listening", "addr", ln.Addr().String(), "impl", *impl, "records", s.records, "direct", *direct)
		if ready != nil {
			ready(ln.Addr())
		}
		return s.serveStd(ctx, ln)
	}
	ln, err := ringpoll.Listen("tcp", *addr, ringpoll.WithEngine(engine))
	if err != nil {
		return err
	}
	log.Info("ringkv listening", "addr", ln.Addr().String(), "impl", *impl, "engine", ln.Stats().Engine.String(), "records", s.records, "direct", *direct)
	h := s.handle
	if *impl == "sendfile" {
		h = s.handleSendFile
	}
	srv, err := ringpoll.NewServer(h)
	if err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	if ready != nil {
		ready(ln.Addr())
	}
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	srv.Shutdown(sctx)
	<-done
	return nil
}

// alignedRecord returns RecordSize bytes aligned for O_DIRECT.
func alignedRecord() *[]byte {
	b := make([]byte, 2*kvproto.RecordSize)
	off := (kvproto.RecordSize - int(uintptr(unsafe.Pointer(&b[0]))%kvproto.RecordSize)) % kvproto.RecordSize
	p := b[off : off+kvproto.RecordSize : off+kvproto.RecordSize]
	return &p
}

// do runs one request and returns the reply payload, appended to out.
func (s *server) do(req []byte, out []byte) []byte {
	op, i, rec, err := kvproto.ParseRequest(req)
	if err == nil && i >= s.records {
		err = fmt.Errorf("record %d of %d", i, s.records)
	}
	if err != nil {
		s.errs.Add(1)
		return append(out, "E"+err.Error()...)
	}
	bp := s.bufs.Get().(*[]byte)
	defer s.bufs.Put(bp)
	buf := *bp
	off := int64(i) * kvproto.RecordSize
	if op == kvproto.OpGet {
		if _, err := s.st.ReadAt(buf, off); err != nil {
			s.errs.Add(1)
			return append(out, "E"+err.Error()...)
		}
		s.gets.Add(1)
		return append(out, buf...)
	}
	copy(buf, rec)
	if _, err := s.st.WriteAt(buf, off); err != nil {
		s.errs.Add(1)
		return append(out, "E"+err.Error()...)
	}
	if err := s.commit.wait(); err != nil {
		s.errs.Add(1)
		return append(out, "E"+err.Error()...)
	}
	s.puts.Add(1)
	return append(out, kvproto.PutOK)
}

// handle answers every whole request in the input, on the handler's
// pooled goroutine; a partial request waits for the rest.
func (s *server) handle(ctx context.Context, c *ringpoll.Conn) error {
	r, w := c.Reader(), c.Writer()
	var out [rpcframe.HeaderLen + kvproto.RecordSize + 256]byte
	answered := false
	for {
		req, ok, err := nextRequest(r)
		if err != nil {
			return err
		}
		if !ok {
			break
		}
		if err := s.reply(w, req, out[:]); err != nil {
			return err
		}
		answered = true
	}
	if !answered {
		return nil
	}
	if err := w.Flush(); err != nil {
		return err
	}
	return r.Release()
}

// reply runs req and writes its framed reply to w (a copy: out, the
// scratch it is built in, serves the next request before Flush).
func (s *server) reply(w *ringpoll.Writer, req, out []byte) error {
	reply := s.do(req, out[:rpcframe.HeaderLen])
	rpcframe.PutHeader(reply, len(reply)-rpcframe.HeaderLen)
	p, err := w.Malloc(len(reply))
	if err != nil {
		return err
	}
	copy(p, reply)
	return nil
}

// handleSendFile is handle with a get's record sent from the file by
// Conn.SendFile.
func (s *server) handleSendFile(ctx context.Context, c *ringpoll.Conn) error {
	r, w := c.Reader(), c.Writer()
	var out [rpcframe.HeaderLen + kvproto.RecordSize + 256]byte
	for {
		req, ok, err := nextRequest(r)
		if err != nil {
			return err
		}
		if !ok {
			break
		}
		op, i, _, perr := kvproto.ParseRequest(req)
		if perr != nil || op != kvproto.OpGet || i >= s.records {
			if err := s.reply(w, req, out[:]); err != nil {
				return err
			}
			continue
		}
		var h [rpcframe.HeaderLen]byte
		rpcframe.PutHeader(h[:], kvproto.RecordSize)
		if _, err := w.WriteBinary(h[:]); err != nil {
			return err
		}
		if err := w.Flush(); err != nil {
			return err
		}
		if _, err := c.SendFile(s.file, int64(i)*kvproto.RecordSize, kvproto.RecordSize); err != nil {
			s.errs.Add(1)
			return err // the reply is cut: the client sees the connection end
		}
		s.gets.Add(1)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	return r.Release()
}

// nextRequest takes the next whole request's payload from r, valid until
// Release; ok is false when the input holds no whole request.
func nextRequest(r *ringpoll.Reader) (req []byte, ok bool, err error) {
	if r.Len() < rpcframe.HeaderLen {
		return nil, false, nil
	}
	h, err := r.Peek(rpcframe.HeaderLen)
	if err != nil {
		return nil, false, err
	}
	n, err := rpcframe.PayloadLen(h)
	if err != nil {
		return nil, false, err // out of step: close the connection
	}
	if r.Len() < rpcframe.HeaderLen+n {
		return nil, false, nil
	}
	b, err := r.Next(rpcframe.HeaderLen + n)
	if err != nil {
		return nil, false, err
	}
	return b[rpcframe.HeaderLen:], true, nil
}

// serveStd serves with std net, a goroutine per connection, until ctx
// ends.
func (s *server) serveStd(ctx context.Context, ln net.Listener) error {
	var wg sync.WaitGroup
	var mu sync.Mutex
	conns := map[net.Conn]bool{}
	go func() {
		<-ctx.Done()
		ln.Close()
		mu.Lock()
		for c := range conns {
			c.Close()
		}
		mu.Unlock()
	}()
	for {
		c, err := ln.Accept()
		if err != nil {
			wg.Wait()
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		mu.Lock()
		conns[c] = true
		mu.Unlock()
		wg.Go(func() {
			s.serveConn(c)
			mu.Lock()
			delete(conns, c)
			mu.Unlock()
			c.Close()
		})
	}
}

func (s *server) serveConn(c net.Conn) {
	br := bufio.NewReaderSize(c, 16<<10)
	bw := bufio.NewWriterSize(c, 16<<10)
	var h [rpcframe.HeaderLen]byte
	var req []byte
	out := make([]byte, 0, rpcframe.HeaderLen+kvproto.RecordSize+256)
	for {
		if br.Buffered() == 0 {
			if bw.Flush() != nil {
				return
			}
		}
		if _, err := io.ReadFull(br, h[:]); err != nil {
			return
		}
		n, err := rpcframe.PayloadLen(h[:])
		if err != nil {
			return
		}
		if cap(req) < n {
			req = make([]byte, n)
		}
		req = req[:n]
		if _, err := io.ReadFull(br, req); err != nil {
			return
		}
		reply := s.do(req, out[:rpcframe.HeaderLen])
		rpcframe.PutHeader(reply, len(reply)-rpcframe.HeaderLen)
		if _, err := bw.Write(reply); err != nil {
			return
		}
	}
}

// committer syncs the file for puts in groups: a put waits for a sync
// that started after its write; one sync covers every put that came while
// the one before ran.
type committer struct {
	sync    func() error
	mu      sync.Mutex
	waiting []chan error
	kick    chan struct{}
	done    chan struct{}
	batches atomic.Uint64 // syncs run
	synced  atomic.Uint64 // puts they covered
}

func newCommitter(sync func() error) *committer {
	c := &committer{sync: sync, kick: make(chan struct{}, 1), done: make(chan struct{})}
	go c.run()
	return c
}

// wait returns once a sync that started after the call has ended, with
// its error.
func (c *committer) wait() error {
	ch := make(chan error, 1)
	c.mu.Lock()
	c.waiting = append(c.waiting, ch)
	c.mu.Unlock()
	select {
	case c.kick <- struct{}{}:
	default:
	}
	return <-ch
}

func (c *committer) run() {
	for {
		select {
		case <-c.kick:
		case <-c.done:
			return
		}
		c.mu.Lock()
		batch := c.waiting
		c.waiting = nil
		c.mu.Unlock()
		if len(batch) == 0 {
			continue
		}
		err := c.sync()
		c.batches.Add(1)
		c.synced.Add(uint64(len(batch)))
		for _, ch := range batch {
			ch <- err
		}
	}
}

func (c *committer) stop() { close(c.done) }
