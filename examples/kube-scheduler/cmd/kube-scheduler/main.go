// Command kube-scheduler is a kube-scheduler binary with gputopo's
// GPUTopology plugin (devices: filter, score, reserve, bind) and its
// GPUTopologyGang plugin (gangs: permit, post-filter, pod-group placements)
// compiled in. Enable both in a KubeSchedulerConfiguration profile (see the
// module's README.md) and run it like the stock scheduler:
//
//	kube-scheduler --config=sched.yaml
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"

	"github.com/gputopo/gputopo/examples/kube-scheduler/plugin"
)

func main() {
	cmd := app.NewSchedulerCommand(app.WithPlugin(plugin.Name, plugin.New), app.WithPlugin(plugin.GangName, plugin.NewGang))
	os.Exit(cli.Run(cmd))
}
