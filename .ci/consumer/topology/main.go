// Command topology imports only gputopo's topology package;
// .ci/consumer/check fails if its module graph lists plotting, Prometheus
// or Kubernetes modules.
package main

import _ "github.com/gputopo/gputopo/topology"

func main() {}
