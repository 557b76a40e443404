package tune

import (
	"github.com/safchain/ethtool"
)

// Ethtool is what the driver says of a NIC's queues, rings and interrupt
// coalescing (ethtool -l, -g, -c), through github.com/safchain/ethtool.
type Ethtool struct {
	Combined, MaxCombined uint32 `json:",omitempty"`
	RX, MaxRX, TX, MaxTX  uint32 `json:",omitempty"`
	RingRX, MaxRingRX     uint32 `json:",omitempty"`
	RingTX, MaxRingTX     uint32 `json:",omitempty"`
	// RxUsecs and RxFrames are the receive interrupt coalescing: an
	// interrupt after that long or that many frames; AdaptiveRX lets the
	// driver choose.
	RxUsecs, RxFrames uint32 `json:",omitempty"`
	AdaptiveRX        bool   `json:",omitempty"`
}

// readEthtool asks the driver of iface; a variable so tests can stand in
// for a driver.
var readEthtool = func(iface string) (*Ethtool, error) {
	e, err := ethtool.NewEthtool()
	if err != nil {
		return nil, err
	}
	defer e.Close()
	ch, err := e.GetChannels(iface)
	if err != nil {
		return nil, err
	}
	info := &Ethtool{Combined: ch.CombinedCount, MaxCombined: ch.MaxCombined, RX: ch.RxCount, MaxRX: ch.MaxRx, TX: ch.TxCount, MaxTX: ch.MaxTx}
	if r, err := e.GetRing(iface); err == nil {
		info.RingRX, info.MaxRingRX, info.RingTX, info.MaxRingTX = r.RxPending, r.RxMaxPending, r.TxPending, r.TxMaxPending
	}
	if c, err := e.GetCoalesce(iface); err == nil {
		info.RxUsecs, info.RxFrames, info.AdaptiveRX = c.RxCoalesceUsecs, c.RxMaxCoalescedFrames, c.UseAdaptiveRxCoalesce != 0
	}
	return info, nil
}
