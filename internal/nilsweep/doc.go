// Package nilsweep holds only a test: it calls every exported function
// and method of the core packages (topology, scoring, mig, gang, provider
// and their public subpackages) with nil and zero arguments and
// receivers, and fails on any panic. A function given nothing useful
// answers with an error or a documented zero answer.
package nilsweep
