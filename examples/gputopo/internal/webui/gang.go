package webui

import (
	"context"
	"fmt"
	"slices"

	"github.com/gputopo/gputopo/gang"
	"github.com/gputopo/gputopo/topology"
)

// treeDomain is one domain of the cluster tree with its nodes.
type treeDomain struct {
	Level    string       `json:"level"`
	Name     string       `json:"name"`
	Path     string       `json:"path"`
	Children []treeDomain `json:"children"`
	Nodes    []treeNode   `json:"nodes"`
}

// treeNode is a cluster node: its GPUs, which are held (and by which
// job), and which the gang placement takes.
type treeNode struct {
	Name    string   `json:"name"`
	GPUs    int      `json:"gpus"`
	Held    []string `json:"held"`    // per device: the job holding it, "" if free
	Placed  []string `json:"placed"`  // per device: the pod the placement puts there, "" if none
	Release []bool   `json:"release"` // per device: held by a releasing pod
}

// gangView is /api/gang: the cluster tree, the job and the verdict.
type gangView struct {
	Origin string       `json:"origin"`
	Levels []string     `json:"levels"`
	Jobs   []string     `json:"jobs"`
	Job    string       `json:"job"`
	Tree   treeDomain   `json:"tree"`
	Result *gang.Result `json:"result"`
}

func newGangView(ctx context.Context, s *gang.Snapshot, jobs []gang.Job, name, origin string) (*gangView, error) {
	if s == nil || len(jobs) == 0 {
		return nil, fmt.Errorf("%w: no gang cluster or job loaded", ErrNotFound)
	}
	v := &gangView{Origin: origin, Levels: s.Cluster().Levels()}
	k := 0
	for i, j := range jobs {
		v.Jobs = append(v.Jobs, j.Name)
		if j.Name == name {
			k = i
		}
	}
	if name != "" && jobs[k].Name != name {
		return nil, fmt.Errorf("%w: job %q (the jobs are %v)", ErrNotFound, name, v.Jobs)
	}
	j := &jobs[k]
	v.Job = j.Name
	res, err := gang.Check(ctx, s, j)
	if err != nil {
		return nil, err
	}
	v.Result = res
	c := s.Cluster()
	nodes := make([]treeNode, c.Len())
	for i := range nodes {
		cn := c.Node(i)
		g := 0
		if cn.Topology != nil {
			g = cn.Topology.Len()
		}
		nodes[i] = treeNode{Name: cn.Name, GPUs: g, Held: make([]string, g), Placed: make([]string, g), Release: make([]bool, g)}
	}
	mark := func(node string, devs []int, f func(n *treeNode, d int)) {
		i, ok := c.NodeIndex(node)
		if !ok {
			return
		}
		for _, d := range devs {
			if d >= 0 && d < nodes[i].GPUs {
				f(&nodes[i], d)
			}
		}
	}
	for _, a := range s.Allocations() {
		job := a.Job
		if job == "" {
			job = a.Pod
		}
		devs := slices.Clone(a.Devices)
		for _, m := range a.MIG {
			devs = append(devs, m.Device)
		}
		mark(a.Node, devs, func(n *treeNode, d int) {
			n.Held[d] = job
			n.Release[d] = n.Release[d] || a.Releasing
		})
	}
	if p := res.Placement; p != nil {
		for _, pod := range p.Pods {
			devs := slices.Clone(pod.Devices)
			for _, m := range pod.MIG {
				devs = append(devs, m.Device)
			}
			mark(pod.Node, devs, func(n *treeNode, d int) { n.Placed[d] = pod.Name })
		}
	}
	v.Tree = tree(c.Root(), nodes)
	return v, nil
}

// tree returns d's subtree with the nodes attached at each level.
func tree(d *topology.Domain, nodes []treeNode) treeDomain {
	t := treeDomain{Level: d.Level(), Name: d.Name(), Path: d.Path(), Children: []treeDomain{}, Nodes: []treeNode{}}
	for _, c := range d.Children() {
		t.Children = append(t.Children, tree(c, nodes))
	}
	for _, i := range d.DirectNodes() {
		t.Nodes = append(t.Nodes, nodes[i])
	}
	return t
}
