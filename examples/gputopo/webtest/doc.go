// Package webtest drives `gputopo serve`'s page in a headless Chromium
// (github.com/chromedp/chromedp): the page loads without console errors,
// its placement query answers what /api/place (and so `gputopo place
// --json`) answers, the cluster view of `gputopo serve --cluster` shows the
// cluster file's numbers and opens each node's page, and screenshots are
// written. It is a module of its
// own so that the browser driver stays out of the CLI's dependencies; run
// it with GOWORK=off:
//
//	cd examples/gputopo/webtest && GOWORK=off go test ./...
//
// The test skips when no Chromium is found (set GPUTOPO_CHROMIUM to its
// path), unless GPUTOPO_REQUIRE_BROWSER=1; screenshots go to
// $GPUTOPO_SCREENSHOTS when set, else to the test's temporary directory.
package webtest
