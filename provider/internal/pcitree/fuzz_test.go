package pcitree

import (
	"strings"
	"testing"

	"github.com/gputopo/gputopo/topology"
)

// FuzzParsePath: the sysfs device-path parser never panics; when it places
// a function, the host bridge is a root bus name from the path and the
// ancestors are valid addresses, at most one per path element.
func FuzzParsePath(f *testing.F) {
	f.Add("../../../devices/pci0000:00/0000:00:01.1/0000:01:00.0/0000:02:00.0/0000:03:00.0", "0000:03:00.0")
	f.Add("../../../devices/pci0000:00/0000:00:0e.0/pci10000:00/10000:00:01.0/10000:01:00.0", "10000:01:00.0")
	f.Add("../../../devices/platform/amdgpu_xcp_3", "0000:03:00.0")
	f.Add("pci0000:00/0000:00:01.1", "0000:00:01.1")
	f.Add("/pci:/0:0:0.0//", "0:0:0.0")
	f.Fuzz(func(t *testing.T, target, addr string) {
		a, err := topology.ParsePCIAddress(addr)
		if err != nil {
			return
		}
		host, anc, ok := parsePath(target, a)
		if !ok {
			if host != "" || anc != nil {
				t.Fatalf("unplaced but host %q ancestors %v", host, anc)
			}
			return
		}
		if !strings.HasPrefix(host, "pci") || !strings.Contains(target, host) {
			t.Fatalf("host %q from %q", host, target)
		}
		for _, x := range anc {
			if !x.IsValid() {
				t.Fatalf("invalid ancestor in %v from %q", anc, target)
			}
		}
		if len(anc) > strings.Count(target, "/") {
			t.Fatalf("%d ancestors from %q", len(anc), target)
		}
	})
}
