module github.com/gputopo/gputopo/examples/gputopo/webtest

go 1.26.0

replace (
	github.com/gputopo/gputopo => ../../..
	github.com/gputopo/gputopo/examples/gputopo => ..
	github.com/gputopo/gputopo/topology/kube => ../../../topology/kube
)

require (
	github.com/chromedp/cdproto v0.160.3
	github.com/chromedp/chromedp v0.20.0
	github.com/gputopo/gputopo v0.0.0-00010101000000-000000000000
	github.com/gputopo/gputopo/examples/gputopo v0.0.0-00010101000000-000000000000
	github.com/stretchr/testify v1.12.1
)

require (
	github.com/go-json-experiment/json v0.0.0-20260213210345-44df1a37e875 // indirect
	go.yaml.in/yaml/v2 v2.4.4 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
)
