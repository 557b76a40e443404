//go:build linux

package uringp

// user_data layout: kind:8 | gen:24 | slot:32. The generation of a slot
// changes each time it is reused, so a CQE that arrives for an old
// connection is recognised as stale (and its provided buffer, if any,
// still goes back to the ring).

type kind uint8

const (
	kindWake        kind = iota + 1 // the eventfd READ
	kindRecv                        // multishot recv
	kindSend                        // SEND or SENDMSG
	kindPoll                        // multishot POLL_ADD for input (reactor)
	kindPollOut                     // multishot POLL_ADD for POLLOUT, after a send's EAGAIN
	kindCancel                      // ASYNC_CANCEL; only failures post a CQE
	kindCancelInput                 // ASYNC_CANCEL of the input request of the connection gen and slot name; only failures post a CQE
	kindFile                        // a file's READ, WRITE or FSYNC; slot indexes the loop's file requests
)

const genMask = 1<<24 - 1

func userData(k kind, gen, slot uint32) uint64 {
	return uint64(k)<<56 | uint64(gen&genMask)<<32 | uint64(slot)
}

func splitUserData(ud uint64) (k kind, gen, slot uint32) {
	return kind(ud >> 56), uint32(ud>>32) & genMask, uint32(ud)
}
