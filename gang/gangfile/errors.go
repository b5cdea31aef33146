package gangfile

import (
	"fmt"

	"github.com/gputopo/gputopo/gang"
	"github.com/gputopo/gputopo/topology"
)

// Size limits of the file formats; the values a file describes are bounded
// by gang's limits (gang.MaxNodes, gang.MaxJobs, ...), checked before they
// are decoded.
const (
	// MaxFileBytes bounds a job or cluster file: the bytes read (ReadAll,
	// ParseJobs, ParseCluster) and the document once YAML anchors and
	// aliases are expanded. The YAML parser holds about 60 times the text
	// while it works, so a dense file at the limit (110,000 allocations)
	// peaks near 200 MB; large clusters are described with node templates
	// ("count", "{i}") and catalogue machines, which cost little text.
	MaxFileBytes = 2 << 20
	// maxExpandedBytes bounds what a cluster file's node templates expand
	// to: the node names, per-node label values and domain paths of every
	// expanded node (an estimate of the memory they take).
	maxExpandedBytes = 32 << 20
)

// parseErr returns an error wrapping gang.ErrParse (topology.ErrParse).
func parseErr(format string, a ...any) error {
	return fmt.Errorf("%w: %s", gang.ErrParse, fmt.Sprintf(format, a...))
}

// limitErr returns an error wrapping gang.ErrParse and topology.ErrLimit.
func limitErr(format string, a ...any) error {
	return fmt.Errorf("%w: %w: %s", gang.ErrParse, topology.ErrLimit, fmt.Sprintf(format, a...))
}

// checkName checks a name's length against gang.MaxNameBytes.
func checkName(what, s string) error {
	if len(s) > gang.MaxNameBytes {
		return limitErr("%s is %d bytes long, more than gang.MaxNameBytes (%d)", what, len(s), gang.MaxNameBytes)
	}
	return nil
}
