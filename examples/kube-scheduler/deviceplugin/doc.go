// Package deviceplugin is a kubelet device plugin (deviceplugin/v1beta1)
// for whole GPUs that honours the devices the GPUTopology scheduler plugin
// chose for a pod.
//
// The scheduler plugin writes its choice on the pod (annotation
// gputopo.io/devices, device indices, and gputopo.io/device-ids, their
// UUIDs). Without help on the node, kubelet and the vendor's device plugin
// hand the container whatever devices they pick, which undoes the
// topology-aware placement. A Plugin:
//
//   - registers its resource (default nvidia.com/gpu) with kubelet over the
//     Registration service, and registers again when kubelet restarts (a
//     restarting kubelet deletes every socket in the device-plugin
//     directory; Run notices that its own socket is gone);
//   - streams the node's devices through ListAndWatch: the GPU UUIDs as
//     device IDs (the index, "3", for a device whose UUID is unknown), each
//     with its NUMA node as a topology hint, and their health, which a
//     HealthSource (or SetHealth) changes while the stream is open;
//   - answers GetPreferredAllocation with the choice of a pod that is bound
//     to this node and about to start, when that choice fits what kubelet
//     offers, and otherwise with scoring.SelectDevices over the devices
//     kubelet offers (the others count as busy; must-include devices are
//     Required), the same objective the scheduler plugin uses, so kubelet's
//     pick is the set the scheduler would choose; the explanation
//     (every score component and the runner-up) is logged. This takes the
//     place of go-gpuallocator in NVIDIA's plugin;
//   - in Allocate, for each container request, finds the pod being started
//     the way GPU-sharing projects do: a pod bound to this node, still
//     Pending, not yet reported on by kubelet (no container statuses), not
//     already claimed by an earlier Allocate (claims expire after
//     Config.ClaimTTL), that asks for this resource and whose
//     gputopo.io/devices choice has as many devices as the request. A pod
//     whose choice is exactly kubelet's devices wins; otherwise the oldest.
//     The answer names the scheduler's devices: CDI devices
//     (nvidia.com/gpu=<id> or amd.com/gpu=<id>) and the vendor's
//     visible-devices variable (NVIDIA_VISIBLE_DEVICES or
//     AMD_VISIBLE_DEVICES). When no pod matches, kubelet's devices are used
//     and a warning is logged.
//
// # Limitations
//
// Kubelet does its own accounting with the device IDs it passed to
// Allocate, not with the ones the plugin answered. When they differ
// (kubelet chose other devices than the scheduler), kubelet believes the
// container holds its own pick, and may later offer devices to another
// container that this one really uses. Answering GetPreferredAllocation
// with the pod's choice (or with the set the scheduler would pick) keeps
// the two the same in the normal case; Allocate's substitution covers the
// rest, and is logged as a warning when it happens.
//
// Kubelet does not say which pod it allocates for. When several pods of
// the same size wait on the node, a container may receive another waiting
// pod's choice; the devices handed out still never overlap, and the node
// ends up as the scheduler planned, but the pod-to-set mapping may be
// swapped. Pods whose GPUs are split over several containers do not
// match (the annotation is per pod) and get kubelet's devices.
//
// GetPreferredAllocation scores with the topology the plugin started from:
// a device that topology marks unhealthy stays out of scored sets even
// after a HealthSource reports it healthy again (the answer then falls back
// to the must-include devices and the lowest indices, with a warning);
// restart the plugin to rescore it. Pod listings are bounded by
// PodListTimeout; when the API server does not answer, Allocate uses
// kubelet's devices.
//
// MIG and shared (fractional) GPUs are out of scope: the plugin offers
// whole devices only.
package deviceplugin
