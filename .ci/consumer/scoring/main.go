// Command scoring imports only gputopo's scoring package; .ci/consumer/check
// fails if its module graph lists plotting, Prometheus or Kubernetes
// modules.
package main

import _ "github.com/gputopo/gputopo/scoring"

func main() {}
