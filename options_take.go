package ringpoll

import (
	"fmt"
	"math/bits"
	"strings"
)

// An option given to a constructor that does not use it is an error, not
// a silent no-op: each exported option records itself in the config it
// configures (config.given), and the constructor checks that record
// against optionRules before it does anything else (config.refuse).

// taker is a set of the constructors that take options.
type taker uint16

const (
	inListen taker = 1 << iota
	inDial
	inNewServer
	inListenPacket
	inDialPacket
	inListenPacketGroup
	inNewPacketServer
	inOpenFile
	inNewFile
	numTakers = iota
)

// takerNames are the constructors' names, in the order of their bits.
var takerNames = [numTakers]string{
	"Listen", "Dial", "NewServer", "ListenPacket", "DialPacket",
	"ListenPacketGroup", "NewPacketServer", "OpenFile", "NewFile",
}

const (
	inAll taker = 1<<numTakers - 1
	// inEngine start an engine, or (NewServer) serve connections on a
	// listener's: they take the options that tune an engine.
	inEngine = inListen | inDial | inNewServer | inOpenFile | inNewFile
	// inConns make the stream connections the per-connection options
	// configure.
	inConns = inListen | inDial | inNewServer
	// inSockets open UDP sockets (NewPacketServer's ListenAndServe does).
	inSockets = inListenPacket | inDialPacket | inListenPacketGroup | inNewPacketServer
)

// String lists the constructors in t.
func (t taker) String() string {
	names := make([]string, 0, bits.OnesCount16(uint16(t)))
	for i, n := range takerNames {
		if t&(1<<i) != 0 {
			names = append(names, n)
		}
	}
	return strings.Join(names, ", ")
}

// engineSet is a set of engines, bit e for Engine e; zero means every one.
type engineSet uint8

func engineSetOf(es ...Engine) engineSet {
	var s engineSet
	for _, e := range es {
		s |= 1 << e
	}
	return s
}

func (s engineSet) has(e Engine) bool { return s == 0 || s&(1<<e) != 0 }

// String lists the engines in s.
func (s engineSet) String() string {
	var names []string
	for e, n := range engineNames {
		if s&(1<<e) != 0 {
			names = append(names, n)
		}
	}
	return strings.Join(names, ", ")
}

// optionID names an exported option.
type optionID uint8

const (
	optEngine optionID = iota
	optLoops
	optInputHighWater
	optOutputHighWater
	optIdleTimeout
	optDrainTimeout
	optInlineHandler
	optLogger
	optBufferRing
	optLoopCPUs
	optBusyPoll
	optReusePort
	optCPUSteering
	optPacketBatch
	optGRO
	optWithoutGSO
	numOptions
)

// optionRule says where an option applies.
type optionRule struct {
	name string
	// in are the constructors that take the option.
	in taker
	// engines are those that use the option, where it tunes an engine
	// (on the inEngine constructors); zero: every engine. An engine
	// named with WithEngine that does not use it makes the option an
	// error there; EngineAuto never does, since what it resolves to
	// depends on the machine (and RINGPOLL_ENGINE).
	engines engineSet
	// same reports whether two configurations agree on the option: a
	// Server given it serves only listeners made with the same.
	same func(a, b *config) bool
}

var (
	ringEngines     = engineSetOf(EngineUring, EngineUringHybrid, EngineUringReactor, EngineUringSQPoll)
	bufferEngines   = engineSetOf(EngineUring, EngineUringHybrid, EngineUringSQPoll)
	busyPollEngines = engineSetOf(EngineUring, EngineUringHybrid, EngineUringReactor)
)

var optionRules = [numOptions]optionRule{
	optEngine:          {name: "WithEngine", in: inAll},
	optLoops:           {name: "WithLoops", in: inEngine, same: func(a, b *config) bool { return a.loops == b.loops }},
	optInputHighWater:  {name: "WithInputHighWater", in: inConns},
	optOutputHighWater: {name: "WithOutputHighWater", in: inConns},
	optIdleTimeout:     {name: "WithIdleTimeout", in: inConns},
	optDrainTimeout:    {name: "WithDrainTimeout", in: inConns},
	optInlineHandler:   {name: "WithInlineHandler", in: inNewServer | inNewPacketServer},
	optLogger:          {name: "WithLogger", in: inAll},
	optBufferRing: {name: "WithBufferRing", in: inEngine, engines: bufferEngines, same: func(a, b *config) bool {
		return a.ring.buffers == b.ring.buffers && a.ring.bufferSize == b.ring.bufferSize
	}},
	optLoopCPUs: {name: "WithLoopCPUs", in: inEngine | inNewPacketServer, engines: ringEngines,
		same: func(a, b *config) bool { return a.ring.cpus == b.ring.cpus }},
	optBusyPoll: {name: "WithBusyPoll", in: inEngine, engines: busyPollEngines,
		same: func(a, b *config) bool { return a.ring.busyPoll == b.ring.busyPoll }},
	optReusePort:   {name: "WithReusePort", in: inListenPacket | inListenPacketGroup | inNewPacketServer},
	optCPUSteering: {name: "WithCPUSteering", in: inListenPacketGroup | inNewPacketServer},
	optPacketBatch: {name: "WithPacketBatch", in: inNewPacketServer},
	optGRO:         {name: "WithGRO", in: inSockets},
	optWithoutGSO:  {name: "WithoutGSO", in: inSockets},
}

// notApplicableError is the error of an option given to a constructor
// that does not take it: it names both, and wraps ErrInvalidOption.
type notApplicableError string

func (e notApplicableError) Error() string { return string(e) }
func (e notApplicableError) Unwrap() error { return ErrInvalidOption }

// give records that option id was given.
func (c *config) give(id optionID) { c.given |= 1 << id }

// gave reports whether option id was given.
func (c *config) gave(id optionID) bool { return c.given&(1<<id) != 0 }

// refuse fails c if it holds an option that constructor t does not
// take, or, where t tunes an engine, one the engine WithEngine named
// does not use. A malformed option's error, found first, stands.
func (c *config) refuse(t taker) {
	if c.err != nil {
		return
	}
	for id := range numOptions {
		if !c.gave(id) {
			continue
		}
		r := &optionRules[id]
		switch {
		case r.in&t == 0:
			c.err = notApplicableError(fmt.Sprintf("ringpoll: %s does not take %s (it applies to %s)", t, r.name, r.in))
			return
		case t&inEngine != 0 && c.engine != EngineAuto && !r.engines.has(c.engine):
			c.err = notApplicableError(fmt.Sprintf("ringpoll: %s on engine %s does not take %s (it applies to %s)", t, c.engine, r.name, r.engines))
			return
		}
	}
}

// configFor returns the configuration of opts for constructor t: the
// options applied (a malformed one is an error, wrapping
// ErrInvalidOption), then checked against t (the same).
func configFor(t taker, opts []Option) (*config, error) {
	c, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	c.refuse(t)
	if c.err != nil {
		return nil, c.err
	}
	return c, nil
}

// engineMismatch returns the name of the first engine option given to a
// Server's configuration srv on which a listener's, ln, differs, or "".
func engineMismatch(srv, ln *config) string {
	for id := range numOptions {
		if r := &optionRules[id]; srv.gave(id) && r.same != nil && !r.same(srv, ln) {
			return r.name
		}
	}
	return ""
}
