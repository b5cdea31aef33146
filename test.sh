#!/usr/bin/env bash
# Runs the tests of every module: the workspace (go.work: the core,
# topology/kube and the CLI) with `go test work`, then each nested module
# outside the workspace on its own go.mod (GOWORK=off): the exporter, the
# kube-scheduler module (with its real control-plane end-to-end tests) and
# the page's browser test (examples/gputopo/webtest).
#
# Arguments go to every `go test` (./test.sh -short, ./test.sh -v ...).
# The nested modules run with -count=1, uncached: the browser test depends
# on a Chromium outside the module, which Go's test cache does not see, and
# the kube-scheduler module's end-to-end tests run a real control plane
# (embedded etcd, kube-apiserver, the scheduler) whose timing a cached pass
# would not exercise. The browser test skips without Chromium unless
# GPUTOPO_REQUIRE_BROWSER=1.
set -euo pipefail
cd "$(dirname "$0")"

echo "== go test work"
go test "$@" work

workspace=$(go list -m -f '{{.Dir}}')
while IFS= read -r mod; do
  dir=$(dirname "$mod")
  abs=$(cd "$dir" && pwd)
  if grep -qxF "$abs" <<<"$workspace"; then
    continue
  fi
  echo "== $dir (GOWORK=off)"
  (cd "$dir" && GOWORK=off go test -count=1 "$@" ./...)
done < <(find . -mindepth 2 -name go.mod -not -path './.*' -not -path '*/testdata/*' | sort)
