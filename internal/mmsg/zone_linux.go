package mmsg

import (
	"net"
	"strconv"
	"sync"
	"time"
)

// zoneTTL is how long a list of interfaces is trusted; a zone it does
// not know makes a new list only after that, as net's own cache does, so
// a peer sending with unknown zones costs no lookup per datagram.
const zoneTTL = 60 * time.Second

// zoneCache maps interface indexes to names and back, for the zones of
// link-local IPv6 addresses.
type zoneCache struct {
	interfaces func() ([]net.Interface, error)
	now        func() time.Time

	mu      sync.RWMutex
	fetched time.Time
	toName  map[uint32]string
	toIndex map[string]uint32
}

var zones = &zoneCache{interfaces: net.Interfaces, now: time.Now}

func zoneName(index uint32) string { return zones.name(index) }
func zoneIndex(zone string) uint32 { return zones.index(zone) }

// name returns the interface's name, or its index in decimal if there is
// no such interface (as net's addresses spell such zones).
func (z *zoneCache) name(index uint32) string {
	if index == 0 {
		return ""
	}
	if n, ok := z.lookName(index); ok {
		return n
	}
	if z.refresh() {
		if n, ok := z.lookName(index); ok {
			return n
		}
	}
	return strconv.FormatUint(uint64(index), 10)
}

// index returns the interface's index for a zone that is a name or a
// decimal index, or 0 if it is neither.
func (z *zoneCache) index(zone string) uint32 {
	if zone == "" {
		return 0
	}
	if n, err := strconv.ParseUint(zone, 10, 32); err == nil {
		return uint32(n)
	}
	if i, ok := z.lookIndex(zone); ok {
		return i
	}
	if z.refresh() {
		if i, ok := z.lookIndex(zone); ok {
			return i
		}
	}
	return 0
}

func (z *zoneCache) lookName(index uint32) (string, bool) {
	z.mu.RLock()
	defer z.mu.RUnlock()
	n, ok := z.toName[index]
	return n, ok
}

func (z *zoneCache) lookIndex(zone string) (uint32, bool) {
	z.mu.RLock()
	defer z.mu.RUnlock()
	i, ok := z.toIndex[zone]
	return i, ok
}

// refresh lists the interfaces again unless the list is younger than
// zoneTTL, and reports whether it did.
func (z *zoneCache) refresh() bool {
	z.mu.Lock()
	defer z.mu.Unlock()
	now := z.now()
	if !z.fetched.IsZero() && now.Sub(z.fetched) < zoneTTL {
		return false
	}
	z.fetched = now
	ifs, err := z.interfaces()
	if err != nil {
		return false
	}
	z.toName = make(map[uint32]string, len(ifs))
	z.toIndex = make(map[string]uint32, len(ifs))
	for _, ifi := range ifs {
		z.toName[uint32(ifi.Index)] = ifi.Name
		z.toIndex[ifi.Name] = uint32(ifi.Index)
	}
	return true
}
