package migfile

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gputopo/gputopo/internal/hostile"
	"github.com/gputopo/gputopo/mig"
	"github.com/gputopo/gputopo/topology"
)

// maxProfiles is package mig's limit on the profiles of one model.
const maxProfiles = 32

// bigModelJSON is a model with 16 slots and 32 one-slice profiles of 16
// placements each: small on disk, 2^16 states.
func bigModelJSON(tracked bool) string {
	var profs []string
	for i := 0; i < maxProfiles; i++ {
		var pls []string
		for s := 0; s < 16; s++ {
			pls = append(pls, fmt.Sprintf(`{"start":%d,"size":1}`, s))
		}
		limit := 0
		if tracked {
			limit = 15
		}
		profs = append(profs, fmt.Sprintf(`{"name":"1g.%dgb","id":%d,"computeSlices":1,"memorySlices":1,"maxInstances":%d,"placements":[%s]}`,
			i+1, i, limit, strings.Join(pls, ",")))
	}
	return fmt.Sprintf(`{"name":"Huge","slots":16,"profiles":[%s]}`, strings.Join(profs, ","))
}

// TestParseFileAdversarial feeds small (or at most a few MB) inputs that
// ask for huge counts: each ends in a typed error, allocating less than
// 64 MB.
func TestParseFileAdversarial(t *testing.T) {
	gpus := func(n int, gpu string) string {
		var b strings.Builder
		b.WriteString(`{"gpus":[`)
		for i := 0; i < n; i++ {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, gpu, i)
		}
		b.WriteString(`]}`)
		return b.String()
	}
	inst := func(n int) string {
		var parts []string
		for i := 0; i < n; i++ {
			parts = append(parts, fmt.Sprintf(`{"profile":"1g.6gb","start":%d}`, i%4))
		}
		return `{"gpus":[{"gpu":"a","model":"A30","instances":[` + strings.Join(parts, ",") + `]}]}`
	}
	models := func(n int) string {
		var parts []string
		for i := 0; i < n; i++ {
			parts = append(parts, fmt.Sprintf(`{"name":"M%d","slots":1,"profiles":[{"name":"1g.1gb","id":1,"computeSlices":1,"memorySlices":1,"placements":[{"start":0,"size":1}]}]}`, i))
		}
		return `{"models":[` + strings.Join(parts, ",") + `]}`
	}
	long := strings.Repeat("x", maxNameBytes+1)
	for name, tc := range map[string]struct {
		doc  string
		want []error
	}{
		"too many GPUs":   {gpus(maxFileGPUs+1, `{"gpu":"g%d","model":"A30"}`), []error{topology.ErrLimit, mig.ErrParse}},
		"many instances":  {inst(mig.MaxSlots + 1), []error{topology.ErrLimit, mig.ErrParse}},
		"too many models": {models(maxFileModels + 1), []error{topology.ErrLimit, mig.ErrParse}},
		"long owner":      {`{"gpus":[{"gpu":"a","model":"A30","instances":[{"profile":"1g.6gb","start":0,"owner":"` + long + `"}]}]}`, []error{topology.ErrLimit}},
		"long gpu name":   {`{"gpus":[{"gpu":"` + long + `","model":"A30"}]}`, []error{topology.ErrLimit}},
		"long hive":       {`{"amd":[{"gpu":"a","hive":"` + long + `","model":"MI300X","compute":"SPX","memory":"NPS1"}]}`, []error{topology.ErrLimit}},
		"amd work":        {`{"amd":[{"gpu":"a","model":"MI300X","compute":"CPX","memory":"NPS1","work":[` + strings.Repeat(`{"partition":0},`, maxAMDWork) + `{"partition":1}]}]}`, []error{topology.ErrLimit}},
		"1e9 slots":       {`{"models":[{"name":"X","slots":1000000000,"profiles":[]}]}`, []error{topology.ErrInvalidRequest, mig.ErrParse}},
		"1e9 instances":   {`{"models":[{"name":"X","slots":8,"profiles":[{"name":"1g.1gb","id":1,"computeSlices":1,"memorySlices":1,"maxInstances":1000000000,"placements":[{"start":0,"size":1}]}]}]}`, []error{topology.ErrInvalidRequest}},
		"huge start":      {`{"gpus":[{"gpu":"a","model":"A30","instances":[{"profile":"1g.6gb","start":1000000000000}]}]}`, []error{mig.ErrIllegalPlacement}},
		"huge size":       {`{"gpus":[{"gpu":"a","model":"A30","instances":[{"profile":"1g.6gb","start":0,"size":1000000000000}]}]}`, []error{mig.ErrIllegalPlacement}},
		"start overflow":  {`{"gpus":[{"gpu":"a","model":"A30","instances":[{"profile":"1g.6gb","start":1e300}]}]}`, []error{mig.ErrParse}},
		"huge partition":  {`{"amd":[{"gpu":"a","model":"MI300X","compute":"CPX","memory":"NPS1","work":[{"partition":1000000000}]}]}`, []error{mig.ErrInvalidLayout}},
		"deep nesting":    {`{"gpus":` + strings.Repeat("[", 1_000_000), []error{mig.ErrParse}},
		"deep objects":    {strings.Repeat(`{"gpus":`, 200_000), []error{mig.ErrParse}},
		"many placements": {`{"models":[{"name":"X","slots":8,"profiles":[{"name":"1g.1gb","id":1,"computeSlices":1,"memorySlices":1,"placements":[` + strings.Repeat(`{"start":0,"size":1},`, 100_000) + `{"start":0,"size":1}]}]}]}`, []error{topology.ErrInvalidRequest}},
		"many aliases":    {`{"models":[{"name":"X","aliases":[` + strings.Repeat(`"a",`, 100_000) + `"a"],"slots":1,"profiles":[{"name":"1g.1gb","id":1,"computeSlices":1,"memorySlices":1,"placements":[{"start":0,"size":1}]}]}]}`, []error{topology.ErrLimit}},
		"state explosion": {`{"models":[` + bigModelJSON(true) + `]}`, []error{topology.ErrLimit, topology.ErrInvalidRequest}},
	} {
		var err error
		n := hostile.Allocated(func() { _, err = parseLayouts([]byte(tc.doc), nil) })
		for _, w := range tc.want {
			assert.ErrorIs(t, err, w, name)
		}
		assert.Less(t, n, uint64(hostile.RaceSlack*64<<20), "%s: %d bytes allocated for a %d-byte input", name, n, len(tc.doc))
	}
	// Over maxFileBytes, from a reader that never ends.
	var err error
	n := hostile.Allocated(func() { _, err = Read(endless{}, nil) })
	require.ErrorIs(t, err, topology.ErrLimit)
	assert.Less(t, n, uint64(hostile.RaceSlack*(3*maxFileBytes+(8<<20))))
	_, err = parseLayouts(make([]byte, maxFileBytes+1), nil)
	require.ErrorIs(t, err, topology.ErrLimit)
}

type endless struct{}

func (endless) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = ' '
	}
	return len(p), nil
}
