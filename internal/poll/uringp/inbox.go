//go:build linux

package uringp

import "github.com/ringpoll/ringpoll/internal/poll"

type taskKind uint8

const (
	taskAttach taskKind = iota
	taskFlush
	taskResume
	taskClose
	taskWatchOut
	taskFile
	taskFileCancel
	taskStop
)

type task struct {
	kind taskKind
	c    *conn
	f    *FileOp
}

// How a loop sleeps (loop.sleeping).
const (
	awake          = iota
	asleepInPoller // parked: a producer sets the parker's deadline
	asleepInKernel // in io_uring_enter: a producer writes the eventfd
)

// post queues t and wakes the loop if it sleeps. The loop sets sleeping,
// re-checks the inbox (queued), and only then blocks; a producer sets
// queued, then writes the eventfd only if it clears sleeping itself. Go's
// atomics are sequentially consistent, so one side always sees the other
// (Dekker).
func (l *loop) post(t task) {
	l.later(t)
	l.wake()
}

func (l *loop) wake() {
	if s := l.sleeping.Load(); s != awake && l.sleeping.CompareAndSwap(s, awake) {
		l.stats.Wakeups.Add(1)
		if s == asleepInPoller {
			l.parker.wake()
			return
		}
		l.ev.Signal()
	}
}

// later queues t from the loop itself, without a wake-up.
func (l *loop) later(t task) {
	l.mu.Lock()
	l.tasks = append(l.tasks, t)
	l.queued.Store(true)
	l.mu.Unlock()
}

// Flush implements poll.Loop.
func (l *loop) Flush(fd *poll.FD) {
	c := (*conn)(fd.Private)
	if l.send != nil && l.send.flush(c) {
		return
	}
	l.post(task{kind: taskFlush, c: c})
}

// Resume implements poll.Loop.
func (l *loop) Resume(fd *poll.FD) { l.post(task{kind: taskResume, c: (*conn)(fd.Private)}) }

// Close implements poll.Loop.
func (l *loop) Close(fd *poll.FD) { l.post(task{kind: taskClose, c: (*conn)(fd.Private)}) }

// WatchWritable implements poll.Loop.
func (l *loop) WatchWritable(fd *poll.FD) { l.post(task{kind: taskWatchOut, c: (*conn)(fd.Private)}) }

// Stats implements poll.Loop.
func (l *loop) Stats() *poll.Stats { return &l.stats }

// pending reports whether the inbox holds work.
func (l *loop) pending() bool {
	if l.queued.Load() {
		return true
	}
	return len(l.starved) > 0 && l.bufs.anyBack()
}

// runTasks runs the inbox and reports whether the loop was told to stop.
func (l *loop) runTasks() (stop bool) {
	if !l.queued.Load() {
		return false
	}
	l.mu.Lock()
	l.running, l.tasks = l.tasks, l.running[:0]
	l.queued.Store(false)
	l.mu.Unlock()
	for i, t := range l.running {
		switch t.kind {
		case taskAttach:
			l.attach(t.c)
		case taskFlush:
			l.flush(t.c)
		case taskResume:
			l.resume(t.c)
		case taskClose:
			l.close(t.c)
		case taskWatchOut:
			l.watchOut(t.c)
		case taskFile:
			l.submitFile(t.f)
		case taskFileCancel:
			l.cancelFile(t.f)
		case taskStop:
			stop = true
		}
		l.running[i] = task{}
	}
	return stop
}
