// Package kubeconfig finds the API server configuration for the node-side
// binaries (node agent, device plugin, DRA plugin): the same rule for all.
package kubeconfig

import (
	"fmt"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// RESTConfig returns the configuration from the kubeconfig file path when
// it is given; otherwise the in-cluster configuration (the binary runs in a
// pod); otherwise $KUBECONFIG or ~/.kube/config (it runs by hand).
func RESTConfig(path string) (*rest.Config, error) {
	if path != "" {
		return clientcmd.BuildConfigFromFlags("", path)
	}
	if cfg, err := rest.InClusterConfig(); err == nil {
		return cfg, nil
	}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(clientcmd.NewDefaultClientConfigLoadingRules(), nil).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("no in-cluster configuration, and no kubeconfig ($KUBECONFIG, ~/.kube/config; or pass --kubeconfig): %w", err)
	}
	return cfg, nil
}
