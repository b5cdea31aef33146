// Package detecterr holds the sentinel that hardware providers wrap when
// they find nothing to describe on a machine.
//
// It sits below package provider so that provider/amd, provider/sysfs and
// provider/nvidia can wrap it without importing provider (which imports
// them for its default detection order). Package provider's Detect makes
// every error wrapping it also match provider.ErrNotDetected.
package detecterr
