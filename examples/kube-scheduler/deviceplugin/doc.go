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
//   - answers GetPreferredAllocation with the scheduler's choice for a
//     container about to start on this node (below), when it fits what
//     kubelet offers, and otherwise with scoring.SelectDevices over the
//     devices kubelet offers (the others count as busy; must-include
//     devices are Required), the same objective the scheduler plugin uses,
//     so kubelet's pick is the set the scheduler would choose; the
//     explanation (every score component and the runner-up) is logged.
//     This takes the place of go-gpuallocator in NVIDIA's plugin;
//   - in Allocate, hands each container exactly the devices kubelet
//     passed in, as CDI devices (nvidia.com/gpu=<id> or amd.com/gpu=<id>)
//     and the vendor's visible-devices variable (NVIDIA_VISIBLE_DEVICES or
//     AMD_VISIBLE_DEVICES);
//   - with Reconcile (RunReconciler), records on each pod the devices
//     kubelet really assigned it, read from kubelet's PodResources API.
//
// # The device handshake
//
// Kubelet does not say which pod or container it allocates for, so the
// plugin cannot know for sure whose choice a request is. The handshake is
// built so that guessing wrong never gives one device to two containers:
//
//  1. Kubelet is the only allocator. Allocate never substitutes devices:
//     the container gets the devices kubelet passed, which kubelet has
//     recorded as that container's (its device manager checkpoint) and
//     will not give to another live container. Kubelet's accounting and
//     the container's devices are the same by construction, whatever order
//     kubelet admits pods in, across plugin restarts (the plugin keeps no
//     state that safety depends on) and kubelet restarts (kubelet restores
//     its checkpoint).
//  2. The scheduler's choice steers kubelet through GetPreferredAllocation.
//     The choice of a pod (gputopo.io/device-ids, else gputopo.io/devices)
//     is dealt to its containers that ask for the resource, in spec order,
//     in ascending device order: each container's share is a slot. A pod is
//     waiting when it is bound to this node, Pending, not being deleted and
//     not yet reported on by kubelet (no container statuses). The
//     preferred answer is the first unclaimed slot of the request's size,
//     oldest pod first, whose devices kubelet offers; kubelet, which admits
//     one pod at a time and asks for its containers in order, takes it.
//     When Allocate then receives exactly a slot's devices, the slot is
//     claimed and not offered again (claims expire after Config.ClaimTTL).
//     Pods whose init containers ask for the resource get kubelet's own
//     pick.
//  3. Kubelet's PodResources API is the truth. Reconcile lists it (List:
//     every active pod's containers and their device IDs) and, for each
//     pod whose annotation is not the union of its containers' devices,
//     writes kubelet's devices into gputopo.io/devices and
//     gputopo.io/device-ids and records a GPUDevicesMismatch event (a pod
//     without the annotation gets GPUDevicesRecorded). The scheduler
//     plugin charges a bound pod the devices its annotation names when
//     they match the pod's request, so after reconciliation the
//     scheduler's tracker holds what kubelet assigned.
//
// When the steering guesses wrong (two waiting pods of one size, kubelet
// admitting the younger first, or a pod deleted between binding and
// start), the pods hold other devices than the scheduler planned, never
// the same device twice: until the reconciler runs, the scheduler may
// believe a device free that a container holds, and kubelet then gives
// the next pod other free devices (it has as many free as the scheduler
// believes, since every pod holds as many devices as it asks for); the
// reconciler then records them. TestHandshake (rapid) drives random
// pods, admission orders, deaths between binding and start and plugin
// restarts through a model of kubelet and the scheduler's records and
// checks exactly this.
//
// # Limitations
//
// GetPreferredAllocation scores with the topology the plugin started from:
// a device that topology marks unhealthy stays out of scored sets even
// after a HealthSource reports it healthy again (the answer then falls back
// to the must-include devices and the lowest indices, with a warning);
// restart the plugin to rescore it. Pod listings are bounded by
// PodListTimeout; when the API server does not answer,
// GetPreferredAllocation answers with scoring's set.
//
// MIG and shared (fractional) GPUs are out of scope: the plugin offers
// whole devices only.
package deviceplugin
