package mmsg

import (
	"net"
	"testing"
	"time"
)

// TestZoneCache: zones are looked up in a list of interfaces made at most
// once a zoneTTL, both ways; a zone no interface has costs no new list
// per datagram, and one that appears is found once the list is old.
func TestZoneCache(t *testing.T) {
	clock := time.Unix(1000, 0)
	lists := 0
	ifs := []net.Interface{{Index: 1, Name: "lo"}, {Index: 7, Name: "eth0"}}
	z := &zoneCache{
		interfaces: func() ([]net.Interface, error) { lists++; return ifs, nil },
		now:        func() time.Time { return clock },
	}
	for range 1000 {
		if got := z.name(7); got != "eth0" {
			t.Fatalf("name(7) = %q, want eth0", got)
		}
		if got := z.index("eth0"); got != 7 {
			t.Fatalf(`index("eth0") = %d, want 7`, got)
		}
		if got := z.name(9); got != "9" {
			t.Fatalf("name(9) = %q, want the index in decimal", got)
		}
		if got := z.index("wlan0"); got != 0 {
			t.Fatalf(`index("wlan0") = %d, want 0`, got)
		}
		if got := z.index("3"); got != 3 {
			t.Fatalf(`index("3") = %d, want 3`, got)
		}
	}
	if lists != 1 {
		t.Errorf("4,000 lookups listed the interfaces %d times, want 1", lists)
	}
	ifs = append(ifs, net.Interface{Index: 9, Name: "wlan0"})
	clock = clock.Add(zoneTTL - time.Second)
	if got := z.index("wlan0"); got != 0 || lists != 1 {
		t.Errorf(`before the list is old: index("wlan0") = %d after %d lists, want 0 after 1`, got, lists)
	}
	clock = clock.Add(time.Second)
	if got := z.index("wlan0"); got != 9 || lists != 2 {
		t.Errorf(`once the list is old: index("wlan0") = %d after %d lists, want 9 after 2`, got, lists)
	}
	if got := z.name(9); got != "wlan0" || lists != 2 {
		t.Errorf("name(9) = %q after %d lists, want wlan0 after 2", got, lists)
	}
	if got, want := zoneName(0), ""; got != want {
		t.Errorf("zoneName(0) = %q, want %q", got, want)
	}
	if got := zoneIndex("lo"); got != 1 {
		t.Errorf(`zoneIndex("lo") = %d on this machine, want 1`, got)
	}
}
