// Package migfile reads and writes the JSON files of package mig: the
// layout file (schema "gputopo-mig/v1": MIG layouts, AMD GPUs of package
// mig/amdpart and, optionally, profile tables that take precedence over
// the catalog) with [Read] and [Marshal], and the template file (schema
// [TemplateSchema]) with [ReadTemplates] and [MarshalTemplates]. The
// gputopo CLI's "mig" command works on such files.
//
// Reading validates every GPU against its model and rejects unknown
// fields and trailing data. Every error wraps mig.ErrParse (which is
// topology.ErrParse) and names the GPU, instance or template at fault; a
// semantic problem also wraps the specific sentinel (mig.ErrOverlap,
// mig.ErrUnknownModel, amdpart.ErrBadMode, ...).
//
// # Limits
//
// Inputs are bounded; a file over a limit is rejected with an error
// wrapping topology.ErrLimit (and mig.ErrParse) that names the limit,
// before the part over it is processed, and decoding costs memory
// proportional to the file's size:
//
//	limit                   value        bounds
//	maxFileBytes            16 MiB       a layout file (at most this + 1 bytes are read)
//	maxFileGPUs             100,000      GPUs of a layout file, MIG and AMD together
//	maxFileModels           64           models of a layout file
//	maxNameBytes            256          a name in a layout or template file
//	maxAMDWork              64           work items of one AMD GPU
//	mig.MaxSlots            16           instances of one MIG GPU
//	maxTemplateFileBytes    1 MiB        a template file (at most this + 1 bytes are read)
//	maxTemplates            1,024        templates of a template file
//	maxTemplateEntries      mig.MaxSlots profile entries of one template
package migfile
