package simulate

// Package scoring's FGD maths (scoring.FGDTask.MemoryMiB,
// scoring.FGDEvaluator's memFree) still counts memory in MiB while simulate
// counts bytes. The two functions below are the only place that converts;
// they go away when scoring moves to bytes. Values the trace gives are
// whole MiB, so the conversion is exact for them.

// freeMiB converts free memory in bytes to whole MiB, rounding down: a
// task never fits in memory that is not there.
func freeMiB(b int64) int64 { return b >> 20 }

// requestMiB converts a memory request in bytes to MiB, rounding up.
func requestMiB(b int64) int64 { return (b + mib - 1) >> 20 }
