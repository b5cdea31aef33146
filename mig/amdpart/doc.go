// Package amdpart plans AMD Instinct partitions. An AMD GPU partitions by
// mode, not by placement: a compute mode ([SPX], [DPX], [TPX], [QPX],
// [CPX]) and a memory mode ([NPS1], [NPS2], [NPS4], [NPS8]) for the whole
// GPU, with identical partitions.
//
// [Model] is one model's rules: which modes combine (the amdgpu driver's
// rules), how many partitions each compute mode makes, their memory and
// compute units. [Models] lists the shipped ones (MI300X, MI325X, MI355X,
// MI308X, MI300A), [Lookup] finds one by name and [NewModel] builds one
// from a [ModelSpec] (a provider that reads sysfs does, with the memory
// modes the device supports). [GPU] is one GPU's modes, hive and [Work].
//
// [Plan] plans a partition for a [Request]: a mode change needs the GPU
// idle, and a memory-mode change reloads the driver for the whole XGMI
// hive, so each GPU taken down is costed as a whole-GPU operation. The
// result is a [mig.Plan] of [mig.Step]s (drain, set-compute-mode,
// set-memory-mode, reload-driver) under the same [mig.Policy] and
// priority safety as MIG defragmentation, and with the same bounded
// [mig.NoPlanError] when nothing is allowed. [ApplyStep] applies a step in
// memory with the same rules; provider/amd applies them to a node through
// sysfs. Plan takes a context.Context, looks at it every few hundred GPUs
// and, once it is done, returns an error wrapping ctx.Err().
//
// Errors wrap [ErrBadMode] for a mode or combination the model lacks,
// package mig's sentinels otherwise (mig.ErrInvalidLayout,
// mig.ErrUnknownModel, mig.ErrInUse, mig.ErrBadStep, mig.ErrUnknownGPU,
// mig.ErrNoPlan), and mig.ErrParse for text that does not parse. The mode
// types implement encoding.TextMarshaler and TextUnmarshaler. Zero values
// and nil pointers return errors or empty results, never panic.
package amdpart
