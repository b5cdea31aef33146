package dra

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"k8s.io/apimachinery/pkg/util/validation"
	"pgregory.net/rapid"
)

// nameGen draws names near the edges the checks care about: the
// characters either side of the allowed ranges, dots and dashes at the
// ends and doubled, lengths around 63 and 253.
func nameGen() *rapid.Generator[string] {
	pieces := []string{"a", "z", "0", "9", "-", ".", "_", "A", "Z", "`", "{", "/", ":", "@", "[", " ", "\n", "é", "ab", "x9-y"}
	return rapid.Custom(func(t *rapid.T) string {
		var b strings.Builder
		if rapid.Bool().Draw(t, "long") {
			// A long run of one valid piece, so that lengths cross 63 and 253.
			b.WriteString(strings.Repeat(rapid.SampledFrom([]string{"a", "ab.", "a-"}).Draw(t, "fill"), rapid.IntRange(20, 130).Draw(t, "times")))
		}
		for _, p := range rapid.SliceOfN(rapid.SampledFrom(pieces), 0, 12).Draw(t, "pieces") {
			b.WriteString(p)
		}
		return b.String()
	})
}

// TestNameChecksAgree checks that the hand-written name checks accept
// exactly the names k8s.io/apimachinery's regular expressions accept: a
// check that accepted more would let an invalid ResourceSlice through,
// one that accepted less would only be slow.
func TestNameChecksAgree(t *testing.T) {
	check := func(t assert.TestingT, s string) {
		assert.Equal(t, len(validation.IsDNS1123Label(s)) == 0, isLabel(s), "label %q", s)
		assert.Equal(t, len(validation.IsDNS1123Subdomain(s)) == 0, isSubdomain(s), "subdomain %q", s)
		assert.Equal(t, len(validation.IsCIdentifier(s)) == 0, isCIdentifier(s), "C identifier %q", s)
		assert.Equal(t, validation.IsDNS1123Label(s), labelProblems(s), "label messages %q", s)
		assert.Equal(t, validation.IsDNS1123Subdomain(s), subdomainProblems(s), "subdomain messages %q", s)
		assert.Equal(t, validation.IsCIdentifier(s), cIdentifierProblems(s), "C identifier messages %q", s)
	}
	for _, s := range []string{
		"", "a", "-", "a-", "-a", "a--b", "0", "a.b", "a..b", ".a", "a.", "a.-b", "a-.b", "A", "_", "_a", "a_b", "9a", "é",
		strings.Repeat("a", 63), strings.Repeat("a", 64),
		strings.Repeat("a.", 126) + "a", strings.Repeat("a.", 126) + "ab", strings.Repeat("a.", 127),
		"gpu.gputopo.io", "resource.kubernetes.io", "pcieRoot", "numa_node",
	} {
		check(t, s)
	}
	rapid.Check(t, func(t *rapid.T) { check(t, nameGen().Draw(t, "name")) })
}
