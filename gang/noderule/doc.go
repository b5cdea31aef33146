// Package noderule holds the Kubernetes rules that decide which nodes a
// pod may use, and which it prefers, without Kubernetes' own types: a
// node's taints and a pod's tolerations (NoSchedule, PreferNoSchedule,
// NoExecute), and node-affinity selector terms, required and preferred
// (In, NotIn, Exists, DoesNotExist, Gt, Lt), as core/v1 defines them.
//
// Package gang reads them from gang.Pod (Tolerations, RequiredNodeAffinity,
// PreferredNodeAffinity) and gang.NodeInfo (Taints), and validates them
// with its other input (bounded by gang.MaxLabels and gang.MaxNameBytes);
// [Toleration.Tolerates] and [SelectorTerm.Matches] are the rules it
// applies, exported so that a scheduler can apply the same ones.
package noderule
