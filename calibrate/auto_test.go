package calibrate_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/retrystorm/retrystorm/calibrate"
	"github.com/retrystorm/retrystorm/internal/promtest"
)

// idleBesideBusy is a window of an idle HAProxy job (its request counter
// flat: haproxy.json's, never moving) beside the lab's busy service
// (lab.json), in one answer, at lab.json's times.
func idleBesideBusy(t *testing.T) promtest.Answer {
	t.Helper()
	lab := promtest.ReadAnswer(t, "testdata/lab.json")
	hap := promtest.ReadAnswer(t, "testdata/haproxy.json")
	times := lab.Data.Result[0].Values
	for _, s := range hap.Data.Result {
		vs := make([][2]any, len(times))
		for i, p := range times {
			vs[i] = [2]any{p[0], s.Values[0][1]} // a flat counter, a still gauge
		}
		s.Values = vs
		lab.Data.Result = append(lab.Data.Result, s)
	}
	return lab
}

// TestAutoPicksTheBusySource: with --source auto, a source whose metrics
// are in the window but whose requests counted none (an idle HAProxy job)
// does not win over the one that served the traffic (issue 37: auto took
// the first source found, HAProxy before the lab, and fitted a rate of 0),
// from files and from a server.
func TestAutoPicksTheBusySource(t *testing.T) {
	a := idleBesideBusy(t)
	file := a.Write(t, filepath.Join(t.TempDir(), "both.json"))
	w, err := calibrate.ReadAnswers([]string{file}, calibrate.Selector{})
	if err != nil {
		t.Fatal(err)
	}
	if src, err := calibrate.Detect(w); err != nil || src.Name != "lab" {
		t.Errorf("from a file: detected %v (%v), want lab", src, err)
	}
	answer, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	u := fakeProm(t, 1, answer, nil)
	start := time.Date(2026, 12, 1, 18, 32, 17, 0, time.UTC)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	w, err = calibrate.Fetch(ctx, calibrate.Live{URL: u, Start: start, End: start.Add(17 * time.Second), Step: time.Second, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if !w.Has("retrystorm_origin_attempts_total") || w.Has("haproxy_backend_http_requests_total") {
		t.Errorf("from a server: read %v, want the lab's metrics", w.Names())
	}
	if !slices.ContainsFunc(w.Notes, func(n string) bool { return n != "" }) {
		t.Errorf("no note says why the lab's metrics, not HAProxy's: %q", w.Notes)
	}
	if r, err := calibrate.Fit(w, nil); err != nil || r.Source.Name != "lab" {
		t.Errorf("fit: %v, %v", r, err)
	}
}
