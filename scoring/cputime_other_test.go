//go:build !unix

package scoring

import "testing"

func reportCPU(b *testing.B, fn func()) {
	for b.Loop() {
		fn()
	}
}
