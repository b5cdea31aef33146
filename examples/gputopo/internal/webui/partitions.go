package webui

import (
	"github.com/gputopo/gputopo/mig"
	"github.com/gputopo/gputopo/mig/migfile"
)

// migGPU is one MIG GPU's layout: its instances on the slot row and, per
// profile, the placements still free.
type migGPU struct {
	GPU       string                     `json:"gpu"`
	Model     string                     `json:"model"`
	Slots     int                        `json:"slots"`
	SlotMap   string                     `json:"slotMap"`
	Instances []mig.Instance             `json:"instances"`
	Profiles  []string                   `json:"profiles"`
	Free      map[string][]mig.Placement `json:"free"`
	FreeSlots int                        `json:"freeSlots"`
	// Fragmentation is the share of free slots unusable for an even mix
	// of the model's profiles (mig.Layout.Fragmentation).
	Fragmentation float64 `json:"fragmentation"`
}

// amdGPU is one AMD GPU's partition mode and the partitions in use.
type amdGPU struct {
	GPU        string   `json:"gpu"`
	Model      string   `json:"model"`
	Hive       string   `json:"hive,omitempty"`
	Compute    string   `json:"compute"`
	Memory     string   `json:"memory"`
	Partitions int      `json:"partitions"`
	Used       []int    `json:"used"`
	Owners     []string `json:"owners"`
}

// partitions is /api/partitions.
type partitions struct {
	Origin string   `json:"origin"`
	MIG    []migGPU `json:"mig"`
	AMD    []amdGPU `json:"amd"`
}

func newPartitions(f *migfile.File, origin string) (partitions, error) {
	out := partitions{Origin: origin, MIG: []migGPU{}, AMD: []amdGPU{}}
	if f == nil {
		return out, nil
	}
	for _, l := range f.Layouts {
		g := migGPU{GPU: l.GPU, Model: l.Model.Name(), Slots: l.Model.Slots(), SlotMap: l.SlotMap(), Instances: l.Instances,
			Free: map[string][]mig.Placement{}, FreeSlots: l.FreeSlots()}
		if g.Instances == nil {
			g.Instances = []mig.Instance{}
		}
		for _, p := range l.Model.Profiles() {
			name := p.Name.String()
			fp, err := l.FreePlacements(name)
			if err != nil {
				return out, err
			}
			g.Profiles = append(g.Profiles, name)
			if fp == nil {
				fp = []mig.Placement{}
			}
			g.Free[name] = fp
		}
		fr, err := l.Fragmentation(nil)
		if err != nil {
			return out, err
		}
		g.Fragmentation = fr.Score
		out.MIG = append(out.MIG, g)
	}
	for _, a := range f.AMD {
		g := amdGPU{GPU: a.GPU, Model: a.Model.Name(), Hive: a.Hive, Compute: a.Compute.String(), Memory: string(a.Memory),
			Partitions: a.Model.Partitions(a.Compute), Used: []int{}, Owners: []string{}}
		for _, w := range a.Work {
			g.Used = append(g.Used, w.Partition)
			g.Owners = append(g.Owners, w.Owner)
		}
		out.AMD = append(out.AMD, g)
	}
	return out, nil
}
