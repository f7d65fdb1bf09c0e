package lab

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/retrystorm/retrystorm/internal/servertest"
	"go.yaml.in/yaml/v3"
)

const rulesDir = "../deploy/prometheus"

// promtool finds promtool (Debian's prometheus package). Without it the
// rule tests skip, except in CI (CI=true), where they must run.
func promtool(t *testing.T) string {
	t.Helper()
	return servertest.Need(t, "promtool", "prometheus")
}

func runPromtool(t *testing.T, args ...string) {
	t.Helper()
	cmd := exec.Command(promtool(t), args...)
	cmd.Dir = rulesDir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	t.Logf("promtool %s:\n%s", strings.Join(args, " "), out)
}

func TestAlertRulesAreValid(t *testing.T) {
	runPromtool(t, "check", "rules", "retrystorm-rules.yml")
}

// TestAlertRulesUnitTests runs retrystorm-rules.test.yml: a healthy job, a
// budgeted one, a storm, a slow creep, a quiet job and a short blip; only
// the storm and the creep page.
func TestAlertRulesUnitTests(t *testing.T) {
	runPromtool(t, "test", "rules", "retrystorm-rules.test.yml")
}

// TestAlertRulesUseTheGatewaysMetrics: every metric the rules read is one
// the lab's gateway exports (through resilprom), so the rules can be tried
// on the lab.
func TestAlertRulesUseTheGatewaysMetrics(t *testing.T) {
	data, err := os.ReadFile(rulesDir + "/retrystorm-rules.yml")
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Groups []struct {
			Rules []struct {
				Record, Alert, Expr string
			}
		}
	}
	if err := yaml.Unmarshal(data, &file); err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	alerts := 0
	for _, g := range file.Groups {
		for _, r := range g.Rules {
			for _, m := range regexp.MustCompile(`\b(resil|retrystorm)_[a-z_]+\b`).FindAllString(r.Expr, -1) {
				names[m] = true
			}
			if r.Alert != "" {
				alerts++
				if !strings.Contains(r.Expr, "retries_per_request") {
					t.Errorf("alert %s does not read retries per request", r.Alert)
				}
			}
		}
	}
	if alerts == 0 || len(names) == 0 {
		t.Fatalf("%d alerts reading %v", alerts, names)
	}
	_, origin := startOrigin(t, OriginConfig{Origin: queueOrigin(1, 100)})
	_, gw := startGateway(t, origin, guardedFleet(time.Second, 10, 5))
	c := testClient(t)
	send(c, "GET", gw, time.Second)
	body := send(c, "GET", gw+"/metrics", time.Second).body
	for n := range names {
		if !strings.Contains(body, "# TYPE "+n+" ") {
			t.Errorf("the rules read %s, which the gateway does not export", n)
		}
	}
}
