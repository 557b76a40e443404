package tune

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
