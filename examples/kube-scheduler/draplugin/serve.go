package draplugin

import (
	"context"
	"fmt"

	"k8s.io/client-go/kubernetes"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
)

// ServeOptions says where the plugin's sockets go and how it reaches the
// API server.
type ServeOptions struct {
	// NodeName is the node the plugin serves.
	NodeName string
	// KubeClient reads the ResourceClaims the kubelet names.
	KubeClient kubernetes.Interface
	// RegistrarDir is the kubelet's plugin registry directory
	// (kubeletplugin.KubeletRegistryDir when empty); it must exist.
	RegistrarDir string
	// PluginDir holds the plugin's dra.sock (kubeletplugin.KubeletPluginsDir
	// "/<driver>" when empty); it must exist. Unix socket paths are limited
	// to about 100 bytes.
	PluginDir string
}

// Start serves d to the kubelet: the registration socket in RegistrarDir
// and the DRA gRPC service (resource.k8s.io v1 and v1beta1 NodePrepareResources
// and NodeUnprepareResources) in PluginDir. Stop the returned helper to
// shut both down. Health reporting is off.
func (d *Driver) Start(ctx context.Context, o ServeOptions) (*kubeletplugin.Helper, error) {
	opts := []kubeletplugin.Option{
		kubeletplugin.DriverName(d.cfg.DriverName),
		kubeletplugin.NodeName(o.NodeName),
		kubeletplugin.KubeClient(o.KubeClient),
		kubeletplugin.HealthService(false),
	}
	if o.RegistrarDir != "" {
		opts = append(opts, kubeletplugin.RegistrarDirectoryPath(o.RegistrarDir))
	}
	if o.PluginDir != "" {
		opts = append(opts, kubeletplugin.PluginDataDirectoryPath(o.PluginDir))
	}
	h, err := kubeletplugin.Start(ctx, d, opts...)
	if err != nil {
		return nil, fmt.Errorf("%w: starting the kubelet plugin: %w", ErrConfig, err)
	}
	return h, nil
}
