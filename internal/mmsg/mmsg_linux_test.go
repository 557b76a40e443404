package mmsg

import (
	"errors"
	"net/netip"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// TestAddressRoundTrip: what encode writes, decode reads back, for each
// family; an IPv4 destination on an IPv6 socket goes mapped, an IPv6 one
// on an IPv4 socket is refused.
func TestAddressRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		addr   string
		family int
		want   string
	}{
		{"192.0.2.7:53", unix.AF_INET, "192.0.2.7:53"},
		{"[::ffff:192.0.2.7]:53", unix.AF_INET, "192.0.2.7:53"},
		{"192.0.2.7:53", unix.AF_INET6, "[::ffff:192.0.2.7]:53"},
		{"[2001:db8::1]:65535", unix.AF_INET6, "[2001:db8::1]:65535"},
		{"[fe80::1%1]:9", unix.AF_INET6, ""},
	} {
		var sa unix.RawSockaddrInet6
		n, err := encode(&sa, netip.MustParseAddrPort(tc.addr), tc.family)
		if err != nil {
			t.Fatalf("encode(%s): %v", tc.addr, err)
		}
		if (tc.family == unix.AF_INET) != (n == unix.SizeofSockaddrInet4) {
			t.Errorf("encode(%s) for family %d: length %d", tc.addr, tc.family, n)
		}
		got := decode(&sa)
		if tc.want == "" {
			if got.Addr().Zone() == "" || got.Port() != 9 {
				t.Errorf("link-local %s came back as %v, without its zone", tc.addr, got)
			}
			continue
		}
		if got.String() != tc.want {
			t.Errorf("%s for family %d came back as %v, want %s", tc.addr, tc.family, got, tc.want)
		}
	}
	var sa unix.RawSockaddrInet6
	if _, err := encode(&sa, netip.MustParseAddrPort("[2001:db8::1]:1"), unix.AF_INET); !errors.Is(err, ErrFamily) {
		t.Errorf("IPv6 on an IPv4 socket: %v", err)
	}
}

// TestSegment reads the UDP_GRO control message the kernel writes, and
// nothing from a message without one.
func TestSegment(t *testing.T) {
	h := NewHeaders(2, 1)
	h.PrepareRecv(0, make([]byte, 16))
	h.PrepareRecv(1, make([]byte, 16))
	ctl := h.ctl[:ctlSpace]
	c := (*unix.Cmsghdr)(unsafe.Pointer(&ctl[0]))
	c.Level, c.Type = unix.SOL_UDP, unix.UDP_GRO
	c.SetLen(unix.CmsgLen(4))
	*(*int32)(unsafe.Pointer(&ctl[unix.CmsgLen(0)])) = 1200
	h.hdrs[0].Hdr.SetControllen(unix.CmsgSpace(4))
	h.hdrs[1].Hdr.SetControllen(0)
	if got := h.Segment(0); got != 1200 {
		t.Errorf("Segment(0) = %d, want 1200", got)
	}
	if got := h.Segment(1); got != 0 {
		t.Errorf("Segment(1) = %d, want 0", got)
	}
}
