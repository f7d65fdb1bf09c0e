package page

import (
	"encoding/base64"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/retrystorm/retrystorm/internal/servertest"
	"github.com/retrystorm/retrystorm/page/live"
)

// linkedScenario is small enough to run at once: thirty seconds of a
// blip against a queue.
const linkedScenario = `name: linked
seed: 3
duration: 30s
tick: 1s
traffic: {rate: 50, arrivals: poisson, clients: 5}
origin: {model: queue, capacity: 60, workers: 6}
triggers:
  - {kind: capacity, at: 10s, for: 5s, capacity: 20}
fleets:
  - name: naive
    timeout: 1s
    retry: {max_retries: 3}
    budget: {use: none}
  - name: guarded
    timeout: 1s
    retry: {max_retries: 3, backoff: {use: exponential, base: 100ms, cap: 5s, jitter: full}}
    budget: {use: token_bucket, settings: {budget_ratio: 0.1, min_tokens: 5}}
`

// TestBrowserEditor opens the page from disk with a scenario in its
// address, as a shared link does, and checks what the editor shows: the
// scenario in the editor, checked and (being cheap) run at once, with the
// same tables and charts as a panel, and claims when it runs as an
// experiment; a link with padding; a scenario with an error, refused
// with its line; a costly one, checked but left for Run; and a fragment
// over 64 KiB, refused before it is read.
func TestBrowserEditor(t *testing.T) {
	needBrowser(t)
	doc, err := Render(freshAssets(t))
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "retrystorm.html")
	if err := os.WriteFile(file, doc, 0o644); err != nil {
		t.Fatal(err)
	}
	base := (&url.URL{Scheme: "file", Path: file}).String()
	ctx := startChromium(t)
	var (
		mu      sync.Mutex
		console []string
	)
	go func() {
		for m, err := range chromedp.Console(ctx) {
			if err != nil {
				return
			}
			if m.Type == chromedp.ConsoleError || m.IsException() {
				mu.Lock()
				console = append(console, fmt.Sprintf("%s: %s", m.Type, m.Text))
				mu.Unlock()
			}
		}
	}()
	open := func(fragment string) {
		t.Helper()
		// A fresh document each time: a link is opened, not navigated to
		// within the page.
		if err := chromedp.Do(ctx, chromedp.Navigate("about:blank"), chromedp.Navigate(base+fragment)); err != nil {
			t.Fatal(err)
		}
		waitFor(t, ctx, "the editor", `window.retrystormEditor != null`, time.Minute)
	}
	b64 := func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }

	// A link without padding: loaded, checked, run at once as `run`.
	open("#scenario=" + b64(linkedScenario))
	waitFor(t, ctx, "the linked scenario run", `retrystormEditor.runs.length > 0`, 2*time.Minute)
	if got := evaluate[string](t, ctx, `document.getElementById('editor-text').value`); got != linkedScenario {
		t.Errorf("the editor holds %q, want the linked scenario", got)
	}
	run := evaluate[struct {
		As     string `json:"as"`
		Error  string `json:"error"`
		Tables int    `json:"tables"`
	}](t, ctx, `retrystormEditor.runs[0]`)
	charts := evaluate[int](t, ctx, `document.querySelectorAll('#editor svg.chart').length`)
	if run.As != live.RunAs || run.Error != "" || run.Tables == 0 || charts == 0 {
		t.Errorf("the linked scenario ran as %q: error %q, %d tables, %d charts", run.As, run.Error, run.Tables, charts)
	}
	if s := evaluate[string](t, ctx, `document.getElementById('editor-status').textContent`); !strings.HasPrefix(s, "Valid: linked, 2 fleets") {
		t.Errorf("the editor says %q", s)
	}

	// With padding, run as the storm experiment: claims.
	padded := base64.URLEncoding.EncodeToString([]byte(linkedScenario + "# padding\n"))
	if !strings.HasSuffix(padded, "=") {
		t.Fatalf("the padded link %q has no padding", padded)
	}
	open("#scenario=" + padded + "&as=storm")
	waitFor(t, ctx, "the padded scenario run", `retrystormEditor.runs.length > 0`, 2*time.Minute)
	if n := evaluate[int](t, ctx, `retrystormEditor.runs[0].claims`); n == 0 || evaluate[int](t, ctx, `document.querySelectorAll('#editor ul.claims li').length`) != n {
		t.Errorf("run as storm: %d claims", n)
	}

	// An error on line 5: refused with its line, marked in the gutter.
	bad := strings.Replace(linkedScenario, "traffic: {rate: 50,", "traffic: {rat: 50,", 1)
	open("#scenario=" + b64(bad))
	waitFor(t, ctx, "the bad scenario checked", `retrystormEditor.checks.length > 0`, time.Minute)
	check := evaluate[struct {
		OK   bool `json:"ok"`
		Line int  `json:"line"`
	}](t, ctx, `retrystormEditor.checks[0]`)
	status := evaluate[string](t, ctx, `document.getElementById('editor-status').textContent`)
	if check.OK || check.Line != 5 || !strings.Contains(status, "line 5, column 11") || !strings.Contains(status, `unknown key "rat"`) {
		t.Errorf("the bad scenario: check %+v, status %q", check, status)
	}
	if m := evaluate[string](t, ctx, `document.querySelector('#editor .gutter .bad').textContent`); strings.TrimSpace(m) != "5" {
		t.Errorf("the gutter marks line %q", m)
	}

	// A costly scenario: checked, not run until Run is pressed.
	long := strings.Replace(linkedScenario, "duration: 30s", "duration: 4h\ntick: 10s", 1)
	long = strings.Replace(long, "tick: 1s\n", "", 1)
	open("#scenario=" + b64(long))
	waitFor(t, ctx, "the costly scenario checked", `retrystormEditor.checks.length > 0`, time.Minute)
	time.Sleep(500 * time.Millisecond)
	if auto, runs := evaluate[bool](t, ctx, `retrystormEditor.checks[0].auto`), evaluate[int](t, ctx, `retrystormEditor.runs.length`); auto || runs != 0 {
		t.Errorf("a four-hour scenario: auto %v, %d runs at once", auto, runs)
	}
	if s := evaluate[string](t, ctx, `document.getElementById('editor-status').textContent`); !strings.Contains(s, "press Run") {
		t.Errorf("the editor says %q", s)
	}

	// Over 64 KiB: refused before it is decoded.
	open("#scenario=" + strings.Repeat("A", 100_000))
	waitFor(t, ctx, "the oversize link refused", `retrystormEditor.loaded === 'error'`, time.Minute)
	if s := evaluate[string](t, ctx, `document.getElementById('editor-status').textContent`); !strings.Contains(s, "over 65536 bytes") {
		t.Errorf("the editor says %q", s)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(console) > 0 {
		t.Errorf("the console holds errors: %q", console)
	}
}

// needBrowser skips a browser test with -short, and where chromium is
// missing, except in CI, which must run it.
func needBrowser(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("the browser tests take half a minute each; go test without -short runs them")
	}
	if _, err := os.Stat(chromium); err != nil {
		servertest.Missing(t, "%s is not installed, so the page is not tested in a browser (apt-get install chromium): %v", chromium, err)
	}
}
