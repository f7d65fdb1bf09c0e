package importer

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/retrystorm/retrystorm/scenario"
)

// TestImportManyRoutes is issue 27's: an Envoy virtual host with ten
// thousand routes that share its retry policy made ten thousand fleets,
// and importing it allocated 1.5 GB (715 MB at the peak) to write 15 MB.
// Identical fleets are now one, which lists the routes it stands for, and
// the import allocates a small multiple of its input.
func TestImportManyRoutes(t *testing.T) {
	const n = 10_000
	data := manyRoutes(n)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	fl, err := Import([]Source{{Name: "envoy.yaml", Data: data}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	out, err := Write(fl, storm(t))
	if err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	alloc := after.TotalAlloc - before.TotalAlloc
	t.Logf("%d routes (%d bytes): %d fleet(s), %d bytes written, %d allocated", n, len(data), len(fl), len(out), alloc)
	if len(fl) != 1 || len(fl[0].Covers) != n-1 {
		t.Fatalf("%d fleets (the first covers %d more), want 1 covering %d more", len(fl), len(fl[0].Covers), n-1)
	}
	if !strings.Contains(string(out), "The same settings stand for 9999 more:\n  #   - envoy.yaml: virtual_hosts[0].routes[1] (cluster \"c\")") {
		t.Errorf("the fleet's note does not list the routes it stands for:\n%.2000s", out)
	}
	if limit := uint64(500 * len(data)); alloc > limit {
		t.Errorf("allocated %d bytes for a %d-byte config: more than %d", alloc, len(data), limit)
	}
}

// TestImportBounds: an import is counted before its fleets are built, and
// refused with the count and what it would cost.
func TestImportBounds(t *testing.T) {
	if err := admit(Envoy, maxItems+1, "routes"); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("%d routes, more than the %d", maxItems+1, maxItems)) {
		t.Errorf("admit over the bound: %v", err)
	}
	// Routes of different settings each make a fleet.
	var b strings.Builder
	b.WriteString("virtual_hosts:\n- name: v\n  domains: ['*']\n  routes:\n")
	for i := range maxFleets + 1 {
		fmt.Fprintf(&b, "  - {match: {prefix: /}, route: {cluster: c, retry_policy: {retry_on: 5xx, num_retries: %d}}}\n", i+1)
	}
	_, err := Import([]Source{{Name: "envoy.yaml", Data: []byte(b.String())}}, Options{})
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("%d fleets of different settings, more than the %d", maxFleets+1, maxFleets)) {
		t.Errorf("import of %d different routes: %v", maxFleets+1, err)
	}
}

// TestFleetNames: every name a config may give a route or a profile
// becomes a name a scenario takes, and no two fleets share one, even when
// a number added to one name is another's ("a", "a (2)", "a").
func TestFleetNames(t *testing.T) {
	long := strings.Repeat("é", 80) // 160 bytes
	for _, c := range []struct {
		in, want []string
	}{
		{[]string{"a", "a (2)", "a"}, []string{"a", "a (2)", "a (3)"}},
		{[]string{"a", "a", "a (2)"}, []string{"a", "a (2)", "a (2) (2)"}},
		{[]string{"evil\u202eroute", "esc\x1b[2Jx", "zero\u200bwidth", "bad\xffbyte", "  ", "hangul\u115ffill"},
			[]string{`evil\u202eroute`, `esc\x1b[2Jx`, `zero\u200bwidth`, `bad\xffbyte`, "envoy", `hangul\u115ffill`}},
		{[]string{long, long}, []string{strings.Repeat("é", 48) + "…", strings.Repeat("é", 46) + "… (2)"}},
	} {
		var fl []Fleet
		for _, n := range c.in {
			f := Fleet{Fleet: scenario.Fleet{Name: n, Timeout: time.Second, Budget: scenario.Budget{Use: scenario.BudgetNone}, Retry: scenario.Retry{Backoff: noBackoff}}, Format: Envoy}
			fl = append(fl, f)
		}
		nameFleets(fl)
		for i, f := range fl {
			if f.Fleet.Name != c.want[i] {
				t.Errorf("%q: fleet %d named %q, want %q", c.in, i, f.Fleet.Name, c.want[i])
			}
			if err := checkFleet(f.Fleet); err != nil {
				t.Errorf("%q: fleet %d: %v", c.in, i, err)
			}
		}
	}
}
