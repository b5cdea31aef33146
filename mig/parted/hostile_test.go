package parted_test

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/gputopo/gputopo/internal/hostile"
	"github.com/gputopo/gputopo/mig"
	"github.com/gputopo/gputopo/mig/parted"
	"github.com/gputopo/gputopo/topology"
)

// Hostile files fail fast, within hostile.Budget, with short messages.
func TestHostile(t *testing.T) {
	parse := func(doc []byte) func() error {
		return func() error {
			_, err := parted.Parse(doc)
			return err
		}
	}
	// Over the size limit, by reader and by bytes.
	big := bytes.Repeat([]byte("#"), parted.MaxConfigBytes+1)
	hostile.Check(t, parse(big), mig.ErrParse, topology.ErrLimit)
	stream := bytes.Repeat([]byte("#"), 64<<20)
	hostile.Check(t, func() error {
		_, err := parted.Read(bytes.NewReader(stream))
		return err
	}, mig.ErrParse, topology.ErrLimit)

	// An alias bomb: nine levels of ten aliases each.
	var b strings.Builder
	b.WriteString("version: v1\nx0: &a0 [\"lol\"]\n")
	for i := 1; i < 10; i++ {
		fmt.Fprintf(&b, "x%d: &a%d [*a%d,*a%d,*a%d,*a%d,*a%d,*a%d,*a%d,*a%d,*a%d,*a%d]\n", i, i, i-1, i-1, i-1, i-1, i-1, i-1, i-1, i-1, i-1, i-1)
	}
	b.WriteString("mig-configs:\n  a: *a9\n")
	hostile.Check(t, parse([]byte(b.String())), mig.ErrParse)

	// Nested lists inside one entry's devices.
	hostile.Check(t, parse([]byte("version: v1\nmig-configs:\n  a:\n    - devices: [\n"+strings.Repeat("[", 5000)+strings.Repeat("]", 5000)+"]\n      mig-enabled: true\n")), mig.ErrParse)

	// Deep nesting.
	hostile.Check(t, parse([]byte("version: v1\nmig-configs: "+strings.Repeat("[", 200000))), mig.ErrParse)

	// Too many configurations, entries, filter IDs, indices; huge numbers.
	var many strings.Builder
	many.WriteString("version: v1\nmig-configs:\n")
	for i := 0; i <= parted.MaxConfigs; i++ {
		fmt.Fprintf(&many, "  c%d: [{devices: all, mig-enabled: false}]\n", i)
	}
	hostile.Check(t, parse([]byte(many.String())), mig.ErrParse, topology.ErrLimit)
	entries := "version: v1\nmig-configs:\n  a: [" + strings.Repeat("{devices: all, mig-enabled: false},", parted.MaxEntries+1) + "]\n"
	hostile.Check(t, parse([]byte(entries)), mig.ErrParse, topology.ErrLimit)
	ids := "version: v1\nmig-configs:\n  a: [{devices: all, mig-enabled: false, device-filter: [" + strings.Repeat("\"0x1\",", parted.MaxFilterIDs+1) + "]}]\n"
	hostile.Check(t, parse([]byte(ids)), mig.ErrParse, topology.ErrLimit)
	idx := "version: v1\nmig-configs:\n  a: [{devices: [" + strings.Repeat("1,", 100000) + "], mig-enabled: false}]\n"
	hostile.Check(t, parse([]byte(idx)), mig.ErrParse, topology.ErrLimit)
	huge := "version: v1\nmig-configs:\n  a: [{devices: all, mig-enabled: true, mig-devices: {\"1g.10gb\": " + strings.Repeat("9", 100000) + "}}]\n"
	hostile.Check(t, parse([]byte(huge)), mig.ErrParse)
	hugeIdx := "version: v1\nmig-configs:\n  a: [{devices: [" + strings.Repeat("9", 100000) + "], mig-enabled: true}]\n"
	hostile.Check(t, parse([]byte(hugeIdx)), mig.ErrParse)
	longKey := "version: v1\nmig-configs:\n  " + strings.Repeat("n", 100000) + ": [{devices: all, mig-enabled: false}]\n"
	hostile.Check(t, parse([]byte(longKey)), mig.ErrParse) // the YAML library refuses keys over 1024 bytes
	longName := "version: v1\nmig-configs:\n  " + strings.Repeat("n", parted.MaxNameBytes+1) + ": [{devices: all, mig-enabled: false}]\n"
	hostile.Check(t, parse([]byte(longName)), mig.ErrParse, topology.ErrLimit)
	// The largest file of one long list.
	full := "version: v1\nmig-configs:\n  a: [{devices: all, mig-enabled: false, device-filter: ["
	full += strings.Repeat("1,", (parted.MaxConfigBytes-len(full)-10)/2) + "]}]\n"
	hostile.Check(t, parse([]byte(full)), mig.ErrParse, topology.ErrLimit)
	var profiles strings.Builder
	profiles.WriteString("version: v1\nmig-configs:\n  a: [{devices: all, mig-enabled: true, mig-devices: {")
	for i := 0; i <= parted.MaxDeviceEntries; i++ {
		fmt.Fprintf(&profiles, "\"%dg.%dgb\": 1,", i+1, i+1)
	}
	profiles.WriteString("}}]\n")
	hostile.Check(t, parse([]byte(profiles.String())), mig.ErrParse, topology.ErrLimit)
}

// FuzzParse: whatever parses marshals to bytes that parse to the same
// configuration; whatever fails wraps mig.ErrParse.
func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		"version: v1\nmig-configs:\n  a:\n    - devices: all\n      mig-enabled: true\n      mig-devices: {\"1g.10gb\": 7}\n",
		"version: v1\nmig-configs:\n  b:\n    - device-filter: 0x20B510DE\n      devices: [0, 3]\n      mig-enabled: false\n",
		"version: v1\nmig-configs:\n  c:\n    - device-filter: [\"0x20B510DE\", \"0x233010DE\"]\n      devices: all\n      mig-enabled: true\n      mig-devices: {\"3g.40gb\": 1, \"1g.10gb+me\": 1}\n",
		"version: v1\nmig-configs: {}\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := parted.Parse(data)
		if err != nil {
			if !errorsIs(err, mig.ErrParse) {
				t.Fatalf("error without mig.ErrParse: %v", err)
			}
			return
		}
		out, err := c.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		back, err := parted.Parse(out)
		if err != nil {
			t.Fatalf("marshalled form does not parse: %v\n%s", err, out)
		}
		again, err := back.Marshal()
		if err != nil || !bytes.Equal(out, again) {
			t.Fatalf("round trip changed the configuration:\n%s\n%s", out, again)
		}
		c.Templates(nil) // must not panic
	})
}

func errorsIs(err, target error) bool { return errors.Is(err, target) }
