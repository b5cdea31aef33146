package nvidia

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/gputopo/gputopo/provider/nvidia/nvml"
	"github.com/gputopo/gputopo/topology"
)

// GPMDevice is the optional part of an [nvml.Device] for GPU Performance
// Monitoring (GPM), which NVML offers on Hopper and newer GPUs with driver
// R520 and later. A Device that does not implement it has no GPM; the
// implementation over go-nvml implements it and answers
// [CodeFunctionNotFound] when the installed driver lacks the functions.
type GPMDevice interface {
	// GPMSupported reports whether the GPU supports GPM
	// (nvmlGpmQueryDeviceSupport).
	GPMSupported() (bool, error)
	// GPMMIGSample allocates a sample and fills it with the counters of
	// the GPU instance with the given id (nvmlGpmSampleAlloc,
	// nvmlGpmMigSampleGet). The caller frees it.
	GPMMIGSample(gpuInstanceID int) (GPMSample, error)
}

// GPMSample is one GPM sample of a [GPMDevice].
type GPMSample interface {
	// Metrics computes the metrics over the interval from earlier (a
	// sample of the same GPU instance taken before this one) to this
	// sample (nvmlGpmMetricsGet). Each metric carries its own error.
	Metrics(earlier GPMSample, ids []GPMMetricID) ([]GPMMetric, error)
	// Free releases the sample (nvmlGpmSampleFree).
	Free() error
}

// GPMMetricID is an NVML GPM metric (nvmlGpmMetricId_t).
type GPMMetricID int

// GPM metrics the provider reads, with NVML's values. Both are percentages
// (0..100) over the interval between two samples.
const (
	// GPMSMUtilization is NVML_GPM_METRIC_SM_UTIL: the share of time the
	// SMs had at least one warp resident.
	GPMSMUtilization GPMMetricID = 2
	// GPMSMOccupancy is NVML_GPM_METRIC_SM_OCCUPANCY: resident warps as a
	// share of the SMs' maximum.
	GPMSMOccupancy GPMMetricID = 3
)

// GPMMetric is one computed GPM metric.
type GPMMetric struct {
	// ID names the metric.
	ID GPMMetricID
	// Value is its value (a percentage for the metrics above).
	Value float64
	// Err is NVML's answer for this metric (nil on success).
	Err error
}

// ErrNoGPM is wrapped by [GPMGPU.Err] when a GPU in MIG mode has no GPM
// readings: the library has no GPM, the driver lacks the functions, or the
// GPU does not support it (before Hopper).
var ErrNoGPM = errors.New("nvidia: GPM not available")

// GPMReading is one [GPMSampler.Sample].
type GPMReading struct {
	// GPUs holds an entry per readable GPU in MIG mode, in index order.
	// GPUs not in MIG mode are left out (their utilisation is in
	// [GPU.Utilization]).
	GPUs []GPMGPU
}

// GPMGPU is the GPM reading of one GPU in MIG mode.
type GPMGPU struct {
	// Index is the NVML index; UUID the GPU UUID.
	Index int
	UUID  string
	// Err is nil when GPM works on the GPU; otherwise it wraps [ErrNoGPM]
	// and the NVML [nvml.Code] and Instances is empty.
	Err error
	// Instances holds an entry per GPU instance with a compute instance
	// (a MIG device), in the order NVML lists the MIG devices.
	Instances []GPMInstance
}

// GPMInstance is the GPM reading of one MIG GPU instance. Samples are kept
// by GPU UUID and GPU instance id: an instance destroyed and recreated with
// the same id between two samples is compared with its predecessor's
// sample once (NVML reuses ids).
type GPMInstance struct {
	// GPUInstanceID is the GPU instance id ([GPUInstanceInfo.ID]).
	GPUInstanceID int
	// Interval is the time since the previous sample of the instance, over
	// which the values are computed; 0 for the first sample (no values).
	Interval time.Duration
	// SMUtilization and SMOccupancy are 0..1; nil when not read (first
	// sample, metric not supported, or a value out of range).
	SMUtilization, SMOccupancy *float64
	// Err is why the instance could not be sampled; nil otherwise.
	Err error
}

// GPMSampler reads GPM metrics of every MIG GPU instance over the interval
// between two calls of Sample: NVML computes them from two samples, so the
// first call yields none and each later one the values since the call
// before. It keeps NVML initialised from its first successful Sample until
// Close. It is safe for concurrent use.
type GPMSampler struct {
	lib nvml.Library
	now func() time.Time

	mu     sync.Mutex
	open   bool
	closed bool
	prev   map[gpmKey]gpmPrev
}

type gpmKey struct {
	uuid string
	gi   int
}

type gpmPrev struct {
	s  GPMSample
	at time.Time
}

// ErrClosed is returned by [GPMSampler.Sample] after Close.
var ErrClosed = errors.New("nvidia: sampler closed")

// GPMSampler returns a sampler over the provider's NVML library.
func (p *Provider) GPMSampler() *GPMSampler {
	if p == nil {
		return &GPMSampler{now: time.Now, prev: map[gpmKey]gpmPrev{}}
	}
	return &GPMSampler{lib: p.lib, now: time.Now, prev: map[gpmKey]gpmPrev{}}
}

// gpmMetrics are the metrics Sample asks for.
var gpmMetrics = []GPMMetricID{GPMSMUtilization, GPMSMOccupancy}

// Sample takes a GPM sample of every GPU instance of every GPU in MIG mode
// and returns the metrics since the previous Sample. A GPU without GPM is
// listed with Err set (the caller may log it once); a GPU that cannot be
// read is left out. Errors wrap [ErrNoNVML] (NVML cannot be initialised),
// [ErrDiscovery] (the device count cannot be read), [ErrClosed], or are
// the context's.
func (s *GPMSampler) Sample(ctx context.Context) (*GPMReading, error) {
	if s == nil || s.lib == nil {
		return nil, fmt.Errorf("nvidia: a nil or zero GPMSampler (use Provider.GPMSampler of a Provider from New): %w", topology.ErrInvalidRequest)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, ErrClosed
	}
	if !s.open {
		if err := s.lib.Init(); err != nil {
			return nil, fmt.Errorf("%w: init: %w", ErrNoNVML, err)
		}
		s.open = true
	}
	n, err := s.lib.DeviceCount()
	if err != nil {
		return nil, fmt.Errorf("%w: device count: %w", ErrDiscovery, err)
	}
	if n > topology.MaxDevices {
		return nil, fmt.Errorf("%w: NVML reports %d GPUs, more than topology.MaxDevices (%d): %w", ErrDiscovery, n, topology.MaxDevices, topology.ErrLimit)
	}
	seen := map[gpmKey]bool{}
	r := &GPMReading{}
	for i := 0; i < n; i++ {
		if err := ctx.Err(); err != nil {
			s.drop(seen, true)
			return nil, err
		}
		if g, ok := s.sampleGPU(i, seen); ok {
			r.GPUs = append(r.GPUs, g)
		}
	}
	s.drop(seen, false)
	return r, nil
}

// drop frees the kept samples of instances not in seen (all when all).
func (s *GPMSampler) drop(seen map[gpmKey]bool, all bool) {
	for k, p := range s.prev {
		if all || !seen[k] {
			_ = p.s.Free()
			delete(s.prev, k)
		}
	}
}

// sampleGPU samples GPU i; ok is false when it is not in MIG mode or
// cannot be read.
func (s *GPMSampler) sampleGPU(i int, seen map[gpmKey]bool) (GPMGPU, bool) {
	h, err := s.lib.DeviceByIndex(i)
	if err != nil {
		return GPMGPU{}, false
	}
	uuid, err := h.UUID()
	if err != nil || uuid == "" {
		return GPMGPU{}, false
	}
	if on, _, err := h.MIGMode(); err != nil || !on {
		return GPMGPU{}, false
	}
	g := GPMGPU{Index: i, UUID: uuid}
	gd, ok := h.(GPMDevice)
	if !ok {
		g.Err = fmt.Errorf("%w: GPU %d: the NVML library has no GPM", ErrNoGPM, i)
		return g, true
	}
	switch sup, err := gd.GPMSupported(); {
	case err != nil:
		g.Err = fmt.Errorf("%w: GPU %d: GPM support: %w", ErrNoGPM, i, err)
		return g, true
	case !sup:
		g.Err = fmt.Errorf("%w: GPU %d does not support GPM: %w", ErrNoGPM, i, nvml.CodeNotSupported)
		return g, true
	}
	ids, err := gpuInstanceIDs(h)
	if err != nil {
		return g, true
	}
	for _, id := range ids {
		g.Instances = append(g.Instances, s.sampleInstance(gd, gpmKey{uuid, id}, seen))
	}
	return g, true
}

// sampleInstance samples one GPU instance and computes its metrics against
// the kept sample, which it then replaces.
func (s *GPMSampler) sampleInstance(gd GPMDevice, k gpmKey, seen map[gpmKey]bool) GPMInstance {
	in := GPMInstance{GPUInstanceID: k.gi}
	cur, err := gd.GPMMIGSample(k.gi)
	at := s.now()
	if err != nil {
		in.Err = err
		return in
	}
	seen[k] = true
	prev, had := s.prev[k]
	s.prev[k] = gpmPrev{s: cur, at: at}
	if !had {
		return in
	}
	defer func() { _ = prev.s.Free() }()
	in.Interval = at.Sub(prev.at)
	ms, err := cur.Metrics(prev.s, gpmMetrics)
	if err != nil {
		in.Err = err
		return in
	}
	for _, m := range ms {
		if m.Err != nil || !(m.Value >= 0 && m.Value <= 100) {
			continue
		}
		v := m.Value / 100
		switch m.ID {
		case GPMSMUtilization:
			in.SMUtilization = &v
		case GPMSMOccupancy:
			in.SMOccupancy = &v
		}
	}
	return in
}

// gpuInstanceIDs lists the ids of the GPU instances that have a MIG device
// (a compute instance), each once, in MIG device order.
func gpuInstanceIDs(h nvml.Device) ([]int, error) {
	n, err := h.MaxMIGDeviceCount()
	if err != nil {
		return nil, err
	}
	n = min(n, maxMIGDevices)
	var ids []int
	seen := map[int]bool{}
	for j := 0; j < n; j++ {
		md, err := h.MIGDeviceByIndex(j)
		if err != nil {
			if lost(err) {
				return ids, err
			}
			continue
		}
		id, err := md.GPUInstanceID()
		if err != nil || seen[id] {
			continue
		}
		seen[id] = true
		ids = append(ids, id)
	}
	return ids, nil
}

// Close frees the kept samples and shuts NVML down (once for the Init of
// the first successful Sample). Later Samples answer [ErrClosed].
func (s *GPMSampler) Close() error {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	s.drop(nil, true)
	if !s.open {
		return nil
	}
	s.open = false
	return s.lib.Shutdown()
}
