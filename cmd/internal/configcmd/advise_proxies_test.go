package configcmd

import (
	"testing"

	"github.com/retrystorm/retrystorm/importer"
)

// TestAdviseEditsProxies is issue 35's "done when" for the two proxies of
// issue 36: on an nginx location whose upstream's six servers are each
// tried for every failure (proxy_next_upstream with timeouts and 5xx
// answers, non_idempotent) and an HAProxy backend that retries every
// retryable error five times without health checks, both of which check
// calls AT RISK, advise --write writes an edit in the file's own syntax
// (importer.Writable's nginx and HAProxy spaces) that the importer's
// reader of the product accepts, that imports back as the recommendation
// it printed, and with which check finds fewer findings past the
// thresholds over the same cells and seeds. (The real nginx -t and
// haproxy -c accept every such edit: importer's
// TestWritableRealConfigCheck.)
func TestAdviseEditsProxies(t *testing.T) {
	cases := []adviseEditCase{
		{"nginx location and upstream", []string{advisedata("nginx-retries.conf")}, importer.NGINX, "", nil},
		{"haproxy backend", []string{advisedata("haproxy-retries.cfg")}, importer.HAProxy, "", nil},
	}
	if testing.Short() {
		cases = cases[1:]
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { adviseEditsBetter(t, c) })
	}
}
