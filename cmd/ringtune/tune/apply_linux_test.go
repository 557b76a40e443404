package tune

import (
	"os"
	"strings"
	"testing"
)

// TestSettingLive: on this machine, a sysfs file reached through
// sys/class/net's symlinks into sys/devices passes revert's checks and
// is read beneath sys, and so is a sysctl.
func TestSettingLive(t *testing.T) {
	read := 0
	for _, rel := range []string{"sys/class/net/lo/queues/rx-0/rps_cpus", "proc/sys/net/core/netdev_budget"} {
		want, err := os.ReadFile("/" + rel)
		if err != nil {
			t.Logf("not checked: %v", err)
			continue
		}
		read++
		if why := checkPath("/", rel); why != "" {
			t.Errorf("checkPath(/, %s): %s", rel, why)
		}
		if got, err := readSetting("/", rel); err != nil || got != strings.TrimSpace(string(want)) {
			t.Errorf("readSetting(/, %s) = %q, %v; want %q", rel, got, err, want)
		}
	}
	if read == 0 {
		t.Skip("neither file is here to read")
	}
}
