package lab

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/retrystorm/retrystorm/scenario"
	"github.com/retrystorm/retrystorm/sim"
)

// sse reads server-sent events.
type sse struct {
	sc   *bufio.Scanner
	body interface{ Close() error }
}

func openEvents(t *testing.T, url string) *sse {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, "GET", url+"/events", nil)
	resp, err := testClient(t).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return &sse{sc: bufio.NewScanner(resp.Body), body: resp.Body}
}

// next returns the next event's name and data, or "" at the end.
func (s *sse) next() (string, string) {
	var event, data string
	for s.sc.Scan() {
		line := s.sc.Text()
		switch {
		case line == "" && event != "":
			return event, data
		case strings.HasPrefix(line, "event: "):
			event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			data = strings.TrimPrefix(line, "data: ")
		}
	}
	return "", ""
}

func (s *sse) expect(t *testing.T, want string) string {
	t.Helper()
	got, data := s.next()
	if got != want {
		t.Fatalf("event %q (%s), want %q", got, data, want)
	}
	return data
}

func TestLiveStreamsTheRun(t *testing.T) {
	sc := &scenario.Scenario{Name: "s", Tick: time.Second, Duration: 10 * time.Second,
		Triggers: []scenario.Trigger{{Kind: scenario.TriggerCapacity, At: 3 * time.Second, For: 2 * time.Second}},
		Fleets:   []scenario.Fleet{{Name: "naive"}, {Name: "guarded"}}}
	ref := &sim.Result{Fleets: []sim.FleetResult{{Name: "naive", Series: sim.NewSeries(10)}}}
	l := NewLive(sc, []string{"naive", "guarded", "naive, drop_expired"}, 50*time.Millisecond, ref)
	url := startServer(t, l.Handler())

	first := openEvents(t, url)
	var run liveRun
	if err := json.Unmarshal([]byte(first.expect(t, "run")), &run); err != nil {
		t.Fatal(err)
	}
	if run.Ticks != 10 || len(run.Fleets) != 3 || run.Trigger == nil || run.Trigger.End != 5 || len(run.Sim) != 1 || run.WallTickSeconds != 0.05 {
		t.Errorf("run event %+v", run)
	}
	i := l.beginFleet("guarded", liveLinks{Origin: "http://127.0.0.1:1", Gateway: "http://127.0.0.1:2"})
	if i != 1 {
		t.Fatalf("guarded is fleet %d on the page, want 1", i)
	}
	first.expect(t, "fleet")
	l.tick(i, tickValues{Tick: 3, Offered: 42, Queue: 7})
	l.tick(i, tickValues{Tick: 3, Offered: 43, Queue: 7}) // revised
	if d := first.expect(t, "tick"); !strings.Contains(d, `"offered":42`) {
		t.Errorf("tick event %s", d)
	}
	first.expect(t, "tick")

	// A page that connects late gets everything so far, latest values.
	late := openEvents(t, url)
	late.expect(t, "run")
	late.expect(t, "fleet")
	if d := late.expect(t, "tick"); !strings.Contains(d, `"offered":43`) || !strings.Contains(d, `"fleet":1`) {
		t.Errorf("replayed tick %s", d)
	}
	// A fleet the scenario does not have (a counterfactual) is shown too.
	if i := l.beginFleet("naive, drop_expired", liveLinks{}); i != 2 {
		t.Errorf("the counterfactual is fleet %d on the page, want 2", i)
	}
	late.expect(t, "fleet")
	if l.beginFleet("not on the page", liveLinks{}) != -1 {
		t.Error("a fleet the page does not show got an index")
	}
	l.Close()
	first.expect(t, "fleet")
	first.expect(t, "end")
	if e, _ := first.next(); e != "" {
		t.Errorf("after the end: %q", e)
	}
	// After Close, a page gets the past and the stream ends at once.
	after := openEvents(t, url)
	after.expect(t, "run")
}

// TestLivePageIsSelfContained: the page fetches nothing but its own events.
func TestLivePageIsSelfContained(t *testing.T) {
	page := string(livePage)
	for _, re := range []string{`https?://`, `\bsrc=`, `<link\b`, `@import`, `url\(`, `//cdn`} {
		if m := regexp.MustCompile(re).FindString(page); m != "" {
			t.Errorf("the page refers to something outside itself: %q", m)
		}
	}
	for _, want := range []string{`new EventSource("events")`, "offered", "error_rate", "retries_per_request", "queue", "trigger"} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	l := NewLive(&scenario.Scenario{Tick: time.Second, Duration: time.Second}, nil, time.Second, nil)
	defer l.Close()
	r := send(testClient(t), "GET", startServer(t, l.Handler())+"/", time.Second)
	if r.status != http.StatusOK || !strings.HasPrefix(r.header.Get("Content-Type"), "text/html") || r.header.Get("Content-Security-Policy") == "" {
		t.Errorf("GET /: %d %q, CSP %q", r.status, r.header.Get("Content-Type"), r.header.Get("Content-Security-Policy"))
	}
}

func TestNilLiveIsQuiet(t *testing.T) {
	var l *Live
	if l.beginFleet("x", liveLinks{}) != -1 {
		t.Error("a nil Live gave an index")
	}
	l.tick(0, tickValues{})
	l.endFleet(0, sim.FleetResult{})
	l.Close()
}
