package ringpoll

import (
	"github.com/ringpoll/ringpoll/internal/poll"
	"github.com/ringpoll/ringpoll/internal/poll/epoll"
)

func startEngine(k engineKey) (poll.Engine, error) {
	return epoll.New(k.loops)
}
