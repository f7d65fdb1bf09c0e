package page

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/target"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/retrystorm/retrystorm/experiment"
	"github.com/retrystorm/retrystorm/internal/servertest"
	"github.com/retrystorm/retrystorm/scenario"
)

// chromium is Debian's headless-capable browser, which CI installs.
const chromium = "/usr/bin/chromium"

// TestBrowser opens the page from disk in a real headless Chromium, with
// no network to speak of, and uses it as a person would: it waits for the
// simulator, checks that every claim holds, moves a slider, and sees the
// table, the chart and the scenario file follow. It fails on a console
// error and on any request that leaves the page; the page reports one
// when its workers compute other numbers for a panel's defaults than
// retrystorm page did natively.
func TestBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("the browser test takes half a minute; go test without -short runs it")
	}
	if _, err := os.Stat(chromium); err != nil {
		servertest.Missing(t, "%s is not installed, so the page is not tested in a browser (apt-get install chromium): %v", chromium, err)
	}
	doc, err := Render(freshAssets(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(doc) >= MaxBytes {
		t.Fatalf("the page is %d bytes, want under %d", len(doc), MaxBytes)
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "retrystorm.html")
	if err := os.WriteFile(file, doc, 0o644); err != nil {
		t.Fatal(err)
	}
	pageURL := (&url.URL{Scheme: "file", Path: file}).String()

	ctx := startChromium(t)

	var (
		mu       sync.Mutex
		console  []string // errors and warnings, for the verdict
		requests []string
	)
	record := func(ev any) {
		mu.Lock()
		defer mu.Unlock()
		switch ev := ev.(type) {
		case *network.EventRequestWillBeSent:
			requests = append(requests, ev.Request.URL)
		}
	}
	if err := chromedp.Listen(ctx, record); err != nil {
		t.Fatal(err)
	}
	go func() {
		for m, err := range chromedp.Console(ctx) {
			if err != nil {
				return
			}
			if m.Type == chromedp.ConsoleError || m.IsException() || m.Type == chromedp.ConsoleWarning {
				mu.Lock()
				console = append(console, fmt.Sprintf("%s: %s", m.Type, m.Text))
				mu.Unlock()
			}
		}
	}()
	watchWorkers(t, ctx, record)

	start := time.Now()
	if err := chromedp.Do(ctx, chromedp.Navigate(pageURL)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "every panel shown", `window.retrystormTimings && window.retrystormTimings.boot.allRendered != null`, time.Minute)
	t.Logf("every panel shown %.2f s after the navigation began (wall clock, from the test)", time.Since(start).Seconds())
	// A person moving a slider while the workers check the precomputed
	// panels: the step goes before the checks. Moved and moved back, so
	// that the defaults are on screen again for the claims below.
	waitFor(t, ctx, "a panel computed in the browser", `window.retrystormTimings.boot.firstComputed != null`, time.Minute)
	var early []float64
	for _, r := range sliderSteps(t, ctx, "fleets", "rate", false, 2) {
		early = append(early, r.Roundtrip)
	}
	t.Logf("fleets after a slider step while the page computes its first round: input to redrawn panel %s ms", msList(early))
	waitFor(t, ctx, "every panel computed in the browser", `window.retrystormTimings.boot.allComputed != null`, 3*time.Minute)
	t.Logf("every panel computed in the browser %.1f s after the navigation began (wall clock, from the test)", time.Since(start).Seconds())
	boot := evaluate[map[string]float64](t, ctx, `window.retrystormTimings.boot`)
	firstRuns := evaluate[[]struct {
		Panel   string  `json:"panel"`
		Compute float64 `json:"compute"`
	}](t, ctx, `window.retrystormTimings.runs.filter((r) => r.verify)`)
	var each []string
	for _, r := range firstRuns {
		each = append(each, fmt.Sprintf("%s %.0f", r.Panel, r.Compute))
	}
	t.Logf("first computation of each panel, in Go in its worker (ms): %s", strings.Join(each, ", "))
	t.Logf("page %d bytes (%.2f MiB); module %.2f MiB, %.2f MiB gzipped", len(doc), mib(len(doc)), mib(int(boot["moduleBytes"])), mib(int(boot["gzipBytes"])))
	t.Logf("in the page (performance.now, from navigation start): script running at %.0f ms, first panel shown at %.0f ms, every panel shown (as retrystorm page computed it) at %.0f ms; module compiled at %.0f ms, first worker ready at %.0f ms, first panel computed here at %.0f ms, the fast panels at %.0f ms, every panel at %.0f ms",
		boot["script"], boot["firstRender"], boot["allRendered"], boot["compiled"], boot["ready"], boot["firstComputed"], boot["lightComputed"], boot["allComputed"])

	if dir := os.Getenv("RETRYSTORM_PAGE_SHOTS"); dir != "" {
		screenshots(t, ctx, dir)
	}

	// Every claim, of every panel, holds on the defaults.
	type claimState struct {
		Panel string `json:"panel"`
		Text  string `json:"text"`
		Holds string `json:"holds"`
	}
	claims := evaluate[[]claimState](t, ctx, `[...document.querySelectorAll('section.panel ul.claims li')].map(li => ({
		panel: li.closest('section').id, text: li.querySelector('.claim-text').textContent, holds: li.dataset.holds }))`)
	perPanel := map[string]int{}
	for _, c := range claims {
		perPanel[c.Panel]++
		if c.Holds != "true" {
			t.Errorf("%s: the claim %q does not hold in the page", c.Panel, c.Text)
		}
	}
	for _, e := range experiment.All() {
		if perPanel[e.Name] == 0 {
			t.Errorf("the %s panel shows no claim", e.Name)
		}
	}
	// Every column of every chart and every cell of every map carries its
	// read-out (the page moves them out of the SVG's titles as it draws).
	if n := evaluate[int](t, ctx, `document.querySelectorAll('svg .hover rect:not([data-tip]), svg rect.cell:not([data-tip]), svg .hover title, svg rect.cell title').length`); n > 0 {
		t.Errorf("%d chart columns or map cells lack their read-out, or still hold a title", n)
	}
	if n := evaluate[int](t, ctx, `document.querySelectorAll('svg .hover rect[data-tip]').length`); n == 0 {
		t.Error("no chart column carries a read-out")
	}
	if errs := evaluate[[]string](t, ctx, `[...document.querySelectorAll('.error')].map(e => e.textContent)`); len(errs) > 0 {
		t.Errorf("panels show errors: %q", errs)
	}
	// Every panel says which engine answered it: the sweep's map is the
	// analytic model's (the simulator for the adaptive limit), every
	// other panel the simulator's (issue 29).
	engines := evaluate[map[string]string](t, ctx, `Object.fromEntries([...document.querySelectorAll('section.panel')].map(s =>
		[s.id, s.querySelector('.engine').textContent]))`)
	for _, e := range experiment.All() {
		want := "answered by the simulator"
		if e.Grid {
			want = "answered by the model + simulator"
		}
		if engines[e.Name] != want {
			t.Errorf("the %s panel says %q, want %q", e.Name, engines[e.Name], want)
		}
	}
	score := evaluate[string](t, ctx, `document.getElementById('score').textContent.replace(/\s+/g, ' ').trim()`)
	t.Logf("%d claims in %d panels; the page says %q", len(claims), len(perPanel), score)

	// Move the fleets' rate slider, as a person would: focus and arrow
	// keys.
	const table, chart, yaml = `#fleets table`, `#fleets svg.chart`, `#fleets .yaml-text`
	tableBefore := evaluate[string](t, ctx, `document.querySelector('`+table+`').outerHTML`)
	chartBefore := evaluate[string](t, ctx, `document.querySelector('`+chart+`').outerHTML`)
	rate := evaluate[string](t, ctx, `document.getElementById('fleets-rate').value`)
	want, err := strconv.Atoi(rate)
	if err != nil {
		t.Fatalf("the rate slider reads %q", rate)
	}
	const steps = 5
	want += steps
	if err := chromedp.Do(ctx, chromedp.Focus(chromedp.ID("fleets-rate")), chromedp.KeyEvent(strings.Repeat(kb.ArrowRight, steps))); err != nil {
		t.Fatal(err)
	}
	settled := fmt.Sprintf(`document.querySelector('%s').textContent.includes('rate: %d,') && !document.querySelector('#fleets .results').hasAttribute('data-busy')`, yaml, want)
	waitFor(t, ctx, "the fleets panel recomputed", settled, time.Minute)
	if after := evaluate[string](t, ctx, `document.querySelector('`+table+`').outerHTML`); after == tableBefore {
		t.Error("the fleets table did not change when the rate moved")
	}
	if after := evaluate[string](t, ctx, `document.querySelector('`+chart+`').outerHTML`); after == chartBefore {
		t.Error("the fleets chart did not change when the rate moved")
	}

	// The YAML the page shows is a scenario file the command takes.
	text := evaluate[string](t, ctx, `document.querySelector('`+yaml+`').textContent`)
	sc, err := scenario.Parse("fleets.yaml", []byte(text))
	if err != nil {
		t.Fatalf("the page's YAML does not parse: %v\n%s", err, text)
	}
	if sc.Traffic.Rate != float64(want) {
		t.Errorf("the page's YAML has rate %g, want %d", sc.Traffic.Rate, want)
	}
	if _, err := experiment.RunScenario(ctx, sc); err != nil {
		t.Errorf("retrystorm run refuses the page's YAML: %v", err)
	}

	// Single steps of a slider, each waited for until the panel is
	// redrawn with its own result: the time in Go in the worker, and from
	// the input event to the redrawn panel. The fleets' rate slider is
	// moved with the keyboard, as a person would; the other fast panels'
	// sliders from the page's script, which fires the same input event.
	for _, s := range []struct{ panel, knob string }{
		{"fleets", "rate"}, {"storm", "rate"}, {"hedge", "rate"}, {"shed", "rate"}, {"outage", "max_retries"},
	} {
		runs := sliderSteps(t, ctx, s.panel, s.knob, s.panel == "fleets", 6)
		var compute, parse, draw, roundtrip, painted []float64
		for _, r := range runs {
			compute = append(compute, r.Compute)
			parse = append(parse, r.Parse)
			draw = append(draw, r.Draw)
			roundtrip = append(roundtrip, r.Roundtrip)
			painted = append(painted, r.Painted)
		}
		t.Logf("%s recomputed after a slider step (%s): in Go (the worker) %s ms, median %.0f ms; input to redrawn panel %s ms, median %.0f ms (of it, JSON parsed in %.1f ms and the DOM updated in %.1f ms, medians); input to the end of the frame that painted it, median %.0f ms",
			s.panel, s.knob, msList(compute), median(compute), msList(roundtrip), median(roundtrip), median(parse), median(draw), median(painted))
	}

	// Reset puts the defaults back, and with them every claim. The button
	// is clicked from the page's script, not with the mouse: the heavy
	// panels still drawing elsewhere move the layout, and a mouse click
	// aimed where the button was would miss it.
	if err := chromedp.Do(ctx, chromedp.Evaluate[chromedp.Void](`document.querySelector('#fleets button.reset').click()`)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "the fleets reset", fmt.Sprintf(`document.querySelector('%s').textContent.includes('rate: %s,') && !document.querySelector('#fleets .results').hasAttribute('data-busy')`, yaml, rate), time.Minute)
	if n := evaluate[int](t, ctx, `document.querySelectorAll('#fleets li[data-holds="false"]').length`); n > 0 {
		t.Errorf("after a reset, %d of the fleets' claims do not hold", n)
	}

	// The read-out under the pointer, read in the same script that moves
	// the pointer there: a panel drawing meanwhile moves the layout under
	// the real pointer, which hides the read-out.
	if tip := evaluate[string](t, ctx, `(() => {
		document.querySelector('#fleets svg.chart .hover rect[data-tip]')
			.dispatchEvent(new PointerEvent('pointerover', {bubbles: true}));
		const tip = document.getElementById('tip');
		return tip.hidden ? '' : tip.textContent;
	})()`); !strings.Contains(tip, "no budget") {
		t.Errorf("hovering a chart shows %q, want a read-out of every fleet's value", tip)
	}

	mu.Lock()
	defer mu.Unlock()
	for _, c := range console {
		t.Errorf("console: %s", c)
	}
	var blobs, data int
	for _, u := range requests {
		switch {
		case u == pageURL:
			// The document itself, from disk: not a network request.
		case strings.HasPrefix(u, "blob:"):
			blobs++ // the workers' script, made by the page from its own text
		case strings.HasPrefix(u, "data:"):
			data++
		default:
			t.Errorf("the page requested %s", u)
		}
	}
	t.Logf("requests: the document itself (file://), and %d blob: and %d data: URLs the page made from its own text; %d others",
		blobs, data, len(requests)-1-blobs-data)
}

// stepRun is one computation of a panel, as the page records it.
type stepRun struct {
	Panel     string  `json:"panel"`
	ID        int     `json:"id"`
	Compute   float64 `json:"compute"`
	Roundtrip float64 `json:"roundtrip"`
	Parse     float64 `json:"parse"`
	Draw      float64 `json:"draw"`
	Painted   float64 `json:"painted"`
}

// sliderSteps moves the slider of knob on panel n times by one step,
// back and forth, and waits after each step for the run of the very job
// that step asked for, so that every figure belongs to its own input.
// With keys, it moves the slider with the arrow keys; otherwise it steps
// it from the page's script and fires the input event a person's drag
// fires, so no layout shift can make it miss.
func sliderSteps(t *testing.T, ctx context.Context, panel, knob string, keys bool, n int) []stepRun {
	t.Helper()
	id := panel + "-" + knob
	// In view, as for a person moving it, then towards the side with
	// room, and back and forth.
	up := evaluate[bool](t, ctx, `(() => { const i = document.getElementById('`+id+`');
		i.scrollIntoView({block: 'center', behavior: 'instant'}); return Number(i.value) < Number(i.max); })()`)
	if keys {
		if err := chromedp.Do(ctx, chromedp.Focus(chromedp.ID(id))); err != nil {
			t.Fatal(err)
		}
	}
	var out []stepRun
	for range n {
		before := evaluate[int](t, ctx, `window.retrystormTimings.asked['`+panel+`'] || 0`)
		switch {
		case keys:
			key := kb.ArrowLeft
			if up {
				key = kb.ArrowRight
			}
			if err := chromedp.Do(ctx, chromedp.KeyEvent(key)); err != nil {
				t.Fatal(err)
			}
		default:
			step := "stepDown"
			if up {
				step = "stepUp"
			}
			move := `(() => { const i = document.getElementById('` + id + `');
				i.` + step + `(); i.dispatchEvent(new Event('input', {bubbles: true})); })()`
			if err := chromedp.Do(ctx, chromedp.Evaluate[chromedp.Void](move)); err != nil {
				t.Fatal(err)
			}
		}
		up = !up
		asked := `(window.retrystormTimings.asked['` + panel + `'] || 0)`
		waitFor(t, ctx, panel+" asked to recompute", fmt.Sprintf(`%s > %d`, asked, before), time.Minute)
		job := evaluate[int](t, ctx, asked)
		runs := fmt.Sprintf(`window.retrystormTimings.runs.filter((r) => r.id === %d && r.painted != null)`, job)
		waitFor(t, ctx, panel+" redrawn and painted", runs+`.length > 0`, time.Minute)
		out = append(out, evaluate[[]stepRun](t, ctx, runs)[0])
	}
	return out
}

// startChromium starts a headless Chromium for the test, and stops it, and
// every process it started, when the test ends.
func startChromium(t *testing.T) context.Context {
	t.Helper()
	profile := t.TempDir()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromium),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.UserDataDir(profile),
		chromedp.WindowSize(1400, 1000),
		// A closed network: nothing of Chromium's own, and no QUIC.
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("disable-default-apps", true),
		chromedp.Flag("metrics-recording-only", true),
		chromedp.Flag("no-pings", true),
		// Whatever still tries the network (Chromium's own services do,
		// whatever the flags) meets a closed port, loopback included.
		chromedp.ProxyServer("http://127.0.0.1:9"),
		chromedp.Flag("proxy-bypass-list", "<-loopback>"),
	}
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	browserCtx, cancelBrowser := chromedp.NewContext(allocCtx, chromedp.WithErrorf(t.Logf))
	// The test's own deadline, well inside go test's.
	ctx, cancel := context.WithTimeout(browserCtx, 5*time.Minute)
	t.Cleanup(func() {
		cancel()
		// Close the browser gracefully, then make sure: cancel the
		// contexts, which kills what is left.
		closeCtx, done := context.WithTimeout(browserCtx, 10*time.Second)
		// The browser can go before it answers the close: an error here
		// matters only if processes are left.
		closeErr := chromedp.Cancel(closeCtx)
		done()
		cancelBrowser()
		cancelAlloc()
		// Chromium's children must be gone with it.
		deadline := time.Now().Add(10 * time.Second)
		for {
			left := processesUsing(profile)
			if len(left) == 0 {
				return
			}
			if time.Now().After(deadline) {
				t.Errorf("Chromium processes left running: %v (closing it: %v)", left, closeErr)
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
	})
	if err := chromedp.Do(ctx); err != nil { // start the browser now
		t.Fatal(err)
	}
	return ctx
}

// watchWorkers attaches to every worker the page starts, so that their
// requests are seen too: a dedicated worker's requests are reported on
// its own target, not the page's.
func watchWorkers(t *testing.T, ctx context.Context, record func(any)) {
	t.Helper()
	created := make(chan target.ID, 16)
	err := chromedp.ListenBrowser(ctx, func(ev any) {
		if ev, ok := ev.(*target.EventTargetCreated); ok && ev.TargetInfo.Type == "worker" {
			select {
			case created <- ev.TargetInfo.TargetID:
			default:
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case id := <-created:
				wctx, _ := chromedp.NewContext(ctx, chromedp.WithTargetID(id), chromedp.WithDetachOnCancel())
				if err := chromedp.Listen(wctx, record); err != nil && ctx.Err() == nil {
					t.Logf("watching worker %s: %v", id, err)
				}
			}
		}
	}()
}

// processesUsing lists the processes whose command line names the
// profile directory: the browser and every child it started.
func processesUsing(profile string) []string {
	entries, _ := os.ReadDir("/proc")
	var out []string
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && bytes.Contains(cmdline, []byte(profile)) {
			out = append(out, e.Name())
		}
	}
	return out
}

// screenshots saves the top of the page and each panel as PNGs, for a
// person to look at: set RETRYSTORM_PAGE_SHOTS to a directory.
func screenshots(t *testing.T, ctx context.Context, dir string) {
	t.Helper()
	shoot := func(name, scroll string) {
		if err := chromedp.Do(ctx, chromedp.Evaluate[chromedp.Void](scroll), chromedp.Sleep(300*time.Millisecond)); err != nil {
			t.Fatal(err)
		}
		png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	shoot("top", `scrollTo({top: 0, behavior: 'instant'})`)
	for _, e := range experiment.All() {
		shoot(e.Name, `document.getElementById('`+e.Name+`').scrollIntoView({behavior: 'instant'})`)
	}
	shoot("fleets-chart", `document.querySelector('#fleets svg.chart').scrollIntoView({behavior: 'instant'});
		setTimeout(() => {
			const r = document.querySelectorAll('#fleets svg.chart .hover rect')[36], b = r.getBoundingClientRect();
			const at = {bubbles: true, clientX: b.x + b.width / 2, clientY: b.y + 60};
			r.dispatchEvent(new PointerEvent('pointerover', at));
			r.dispatchEvent(new PointerEvent('pointermove', at));
		}, 100)`)
	shoot("sweep-map", `document.querySelector('#sweep .figures').scrollIntoView({behavior: 'instant'})`)
	dark := emulation.SetEmulatedMediaParams{Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: "dark"}}}
	if _, err := chromedp.Call(ctx, emulation.SetEmulatedMedia, dark); err != nil {
		t.Fatal(err)
	}
	shoot("dark-fleets", `document.querySelector('#fleets').scrollIntoView({behavior: 'instant'})`)
	shoot("dark-chart", `document.querySelector('#storm svg.chart').scrollIntoView({behavior: 'instant'})`)
	if _, err := chromedp.Call(ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{}); err != nil {
		t.Fatal(err)
	}
	shoot("top", `scrollTo({top: 0, behavior: 'instant'})`)
	t.Logf("screenshots in %s", dir)
}

// evaluate runs a JavaScript expression in the page and decodes its value.
func evaluate[T any](t *testing.T, ctx context.Context, expr string) T {
	t.Helper()
	raw, err := chromedp.Run(ctx, chromedp.Evaluate[[]byte](expr))
	if err != nil {
		t.Fatalf("evaluating %s: %v", expr, err)
	}
	var v T
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("evaluating %s: %v (%s)", expr, err, raw)
	}
	return v
}

// waitFor polls a JavaScript condition until it holds.
func waitFor(t *testing.T, ctx context.Context, what, cond string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !evaluate[bool](t, ctx, "Boolean("+cond+")") {
		if time.Now().After(deadline) {
			t.Fatalf("waited %s for %s", timeout, what)
		}
		time.Sleep(25 * time.Millisecond)
	}
}

func mib(n int) float64 { return float64(n) / (1 << 20) }

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(v))
	return s[len(s)/2]
}

func msList(v []float64) string {
	var b strings.Builder
	for i, x := range v {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%.0f", x)
	}
	return b.String()
}
