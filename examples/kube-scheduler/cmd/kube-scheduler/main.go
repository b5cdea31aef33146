// Command kube-scheduler is a kube-scheduler binary with gputopo's
// GPUTopology plugin compiled in. Enable the plugin in a
// KubeSchedulerConfiguration profile (see the module's README.md) and run it like the
// stock scheduler:
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
	cmd := app.NewSchedulerCommand(app.WithPlugin(plugin.Name, plugin.New))
	os.Exit(cli.Run(cmd))
}
