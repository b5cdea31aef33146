package nvidiatest

import (
	"github.com/gputopo/gputopo/provider/nvidia"
	"github.com/gputopo/gputopo/provider/nvidia/nvml"
)

// GPM is a fake GPU's GPU Performance Monitoring (Hopper and newer). A GPU
// whose GPM is nil answers GPMSupported false, as NVML does for older
// GPUs; make the GPM functions missing from an older driver with Hook
// (Method "GPMSupported" or "GPMMIGSample" answering
// nvml.CodeFunctionNotFound).
type GPM struct {
	// SMUtilization and SMOccupancy are the percentages Metrics answers
	// for the GPU instance whose placement starts at each memory slice; an
	// instance missing from one answers not supported for that metric.
	SMUtilization, SMOccupancy map[int]float64
	// MetricsErr, when non-nil, is what Metrics answers.
	MetricsErr error

	live, taken int
}

var _ nvidia.GPMDevice = (*device)(nil)

// GPMSupported implements nvidia.GPMDevice.
func (d *device) GPMSupported() (bool, error) {
	g, err := d.call("GPMSupported", 0, -1)
	defer d.m.mu.Unlock()
	if err != nil {
		return false, err
	}
	return g.GPM != nil, nil
}

// GPMMIGSample implements nvidia.GPMDevice: it answers not supported when
// the GPU has no GPM or MIG is off, not found for an id that names no live
// GPU instance.
func (d *device) GPMMIGSample(id int) (nvidia.GPMSample, error) {
	g, err := d.call("GPMMIGSample", 0, id)
	defer d.m.mu.Unlock()
	switch {
	case err != nil:
		return nil, err
	case g.GPM == nil || g.MIG == nil || !g.MIG.Enabled:
		return nil, nvml.CodeNotSupported
	}
	for _, gi := range g.MIG.live() {
		if gi.id == id {
			g.GPM.live++
			g.GPM.taken++
			return &gpmSample{d: d, gi: gi, seq: g.GPM.taken}, nil
		}
	}
	return nil, nvml.CodeNotFound
}

// gpmSample is a fake GPM sample of one GPU instance.
type gpmSample struct {
	d     *device
	gi    *gpuInstance
	seq   int
	freed bool
}

// Metrics implements nvidia.GPMSample. Both samples must be live samples
// of the same GPU instance, earlier taken first; otherwise it answers
// invalid argument.
func (s *gpmSample) Metrics(earlier nvidia.GPMSample, ids []nvidia.GPMMetricID) ([]nvidia.GPMMetric, error) {
	g, err := s.d.call("GPMSample.Metrics", 0, s.gi.id)
	defer s.d.m.mu.Unlock()
	e, ok := earlier.(*gpmSample)
	switch {
	case err != nil:
		return nil, err
	case !ok || e.d.m != s.d.m || e.d.i != s.d.i || e.gi != s.gi || e.freed || s.freed || e.seq >= s.seq:
		return nil, nvml.CodeInvalidArgument
	case g.GPM == nil:
		return nil, nvml.CodeNotSupported
	case g.GPM.MetricsErr != nil:
		return nil, g.GPM.MetricsErr
	}
	out := make([]nvidia.GPMMetric, len(ids))
	for i, id := range ids {
		var vals map[int]float64
		switch id {
		case nvidia.GPMSMUtilization:
			vals = g.GPM.SMUtilization
		case nvidia.GPMSMOccupancy:
			vals = g.GPM.SMOccupancy
		}
		v, ok := vals[s.gi.placement.Start]
		out[i] = nvidia.GPMMetric{ID: id, Value: v}
		if !ok {
			out[i].Err = nvml.CodeNotSupported
		}
	}
	return out, nil
}

// Free implements nvidia.GPMSample. It releases the sample whatever the
// call answers (NVML frees host memory; a lost GPU does not keep it); a
// second Free answers invalid argument.
func (s *gpmSample) Free() error {
	g, err := s.d.call("GPMSample.Free", 0, s.gi.id)
	defer s.d.m.mu.Unlock()
	if s.freed {
		return nvml.CodeInvalidArgument
	}
	s.freed = true
	if g.GPM != nil {
		g.GPM.live--
	}
	return err
}

// LiveGPMSamples returns the GPM samples allocated and not yet freed, over
// all GPUs.
func (m *Machine) LiveGPMSamples() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, g := range m.GPUs {
		if g.GPM != nil {
			n += g.GPM.live
		}
	}
	return n
}
