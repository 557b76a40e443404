package tune

import (
	"net"
	"os"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestReadLive: on this machine, datagrams sent over loopback from a
// thread pinned to one CPU show as NET_RX softirqs on the CPU that lo's
// receive steering picks (the sending one, without RPS), and the test's
// own threads are found.
func TestReadLive(t *testing.T) {
	if _, err := os.Stat("/proc/softirqs"); err != nil {
		t.Skip("no /proc/softirqs here")
	}
	cpu := runtime.NumCPU() - 1
	want := cpu
	if b, err := os.ReadFile("/sys/class/net/lo/queues/rx-0/rps_cpus"); err == nil && strings.Trim(string(b), "0,\n") != "" {
		want = -1 // RPS moves it: any CPU will do
	}
	a := Read("/", os.Getpid())
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // not unlocked: the thread's mask changed
		var set unix.CPUSet
		set.Set(cpu)
		if err := unix.SchedSetaffinity(0, &set); err != nil {
			errc <- err
			return
		}
		rc, err := net.ListenPacket("udp4", "127.0.0.1:0")
		if err != nil {
			errc <- err
			return
		}
		defer rc.Close()
		c, err := net.Dial("udp4", rc.LocalAddr().String())
		if err != nil {
			errc <- err
			return
		}
		defer c.Close()
		for range 2000 {
			c.Write([]byte("ringtune"))
		}
		errc <- nil
	}()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	b := Read("/", os.Getpid())
	r := Compute(a, b)
	if want >= 0 && r.CPUs[want].NetRx <= 0 {
		t.Errorf("CPU %d: NET_RX %.0f/s after 2000 datagrams sent from it", want, r.CPUs[want].NetRx)
	}
	total, threads := 0.0, 0
	for _, c := range r.CPUs {
		total += max(c.NetRx, 0)
		threads += c.Threads
	}
	if total <= 0 || threads == 0 {
		t.Errorf("NET_RX over all CPUs %.0f/s, threads of this process %d", total, threads)
	}
}
