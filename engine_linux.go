package ringpoll

import (
	"sync"

	"github.com/ringpoll/ringpoll/internal/poll"
	"github.com/ringpoll/ringpoll/internal/poll/epoll"
	"github.com/ringpoll/ringpoll/internal/poll/uringp"
)

var uringModes = map[Engine]uringp.Mode{
	EngineUring:        uringp.ModeUring,
	EngineUringHybrid:  uringp.ModeHybrid,
	EngineUringReactor: uringp.ModeReactor,
	EngineUringSQPoll:  uringp.ModeSQPoll,
}

func startEngine(k engineKey) (poll.Engine, error) {
	m, ok := uringModes[k.engine]
	if !ok {
		return epoll.New(k.loops)
	}
	return uringp.New(m, k.loops, uringp.Tuning{
		SQEntries:   k.ring.sqEntries,
		CQEntries:   k.ring.cqEntries,
		Buffers:     k.ring.buffers,
		BufferSize:  k.ring.bufferSize,
		NoRecvLimit: k.ring.noRecvLimit,
		BusyPoll:    k.ring.busyPoll,
		MoveEvery:   k.ring.moveEvery,
		CPUs:        parseCPUList(k.ring.cpus),
	})
}

var uringStatus = sync.OnceValue(uringp.Check)
