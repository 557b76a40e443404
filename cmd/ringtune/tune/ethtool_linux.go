package tune

import (
	"github.com/safchain/ethtool"
)

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
