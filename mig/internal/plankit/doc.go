// Package plankit holds what the MIG planner (package mig) and the AMD
// partition planner (package mig/amdpart) share and neither exports: the
// policy's refusal rules, the bounded log of rejected ways of making room,
// fleet validation, and the enum text-form helpers.
//
// Policy mirrors mig.Policy field for field, so that mig converts its
// Policy with a plain conversion (plankit.Policy(p)); the compiler checks
// that the two stay identical.
package plankit
