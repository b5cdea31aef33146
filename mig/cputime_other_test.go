//go:build !unix

package mig

import "time"

func processCPU() time.Duration { return 0 }
