// Package shareddata finds and reads the project's shared real-hardware data
// (../shared/data beside the checkout: machine topologies in the
// gpu-topology/v1 form, KFD sysfs dumps, the Alibaba GPU trace) for tests.
//
// The data comes from public sources and is never copied into the project.
// When it is absent (a user's fresh clone) tests call [Require] and skip with
// a clear message. GPUTOPO_SHARED overrides the location.
package shareddata
