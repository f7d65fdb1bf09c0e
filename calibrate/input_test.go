package calibrate_test

import (
	"cmp"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/retrystorm/retrystorm/calibrate"
	"github.com/retrystorm/retrystorm/internal/promtest"
)

// fitFiles fits the saved answers of files, failing t on an error.
func fitFiles(t *testing.T, files ...string) *calibrate.Result {
	t.Helper()
	w, err := calibrate.ReadAnswers(files, calibrate.Selector{})
	if err != nil {
		t.Fatal(err)
	}
	r, err := calibrate.Fit(w, nil)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestSeriesTwice: a series that comes twice is held once (issue 37: two
// copies of one saved window in --file DIR doubled the rate and the
// capacity), and the window's notes say which; two parts of one window
// are joined; two copies that disagree are refused, naming both files;
// samples in reverse order are read in time order (they gave "every
// series has one sample"). Each fits as haproxy.json alone.
func TestSeriesTwice(t *testing.T) {
	orig := promtest.ReadAnswer(t, "testdata/haproxy.json")
	want := fitFiles(t, "testdata/haproxy.json")
	dir := t.TempDir()
	half := func(first bool) func(s promtest.AnswerSeries) promtest.AnswerSeries {
		return func(s promtest.AnswerSeries) promtest.AnswerSeries {
			if first {
				s.Values = s.Values[:len(s.Values)/2+1] // one sample in common
			} else {
				s.Values = s.Values[len(s.Values)/2:]
			}
			return s
		}
	}
	reversed := func(s promtest.AnswerSeries) promtest.AnswerSeries { slices.Reverse(s.Values); return s }
	changed := orig.Edited(func(s promtest.AnswerSeries) promtest.AnswerSeries { s.Values[7][1] = "1"; return s })
	for _, c := range []struct {
		name  string
		files []string
		note  string // a window note that must be there
		err   string // or the error
	}{
		{"two copies in a directory", []string{orig.Write(t, filepath.Join(dir, "copies", "a.json")), orig.Write(t, filepath.Join(dir, "copies", "b.json"))},
			"15 series of " + filepath.Join(dir, "copies", "a.json") + " are again in " + filepath.Join(dir, "copies", "b.json") + ", identical: each is counted once", ""},
		{"two halves", []string{orig.Edited(half(true)).Write(t, filepath.Join(dir, "first.json")), orig.Edited(half(false)).Write(t, filepath.Join(dir, "second.json"))},
			"each series is read once, its samples joined", ""},
		{"reverse order", []string{orig.Edited(reversed).Write(t, filepath.Join(dir, "reversed.json"))}, "", ""},
		{"copies that differ", []string{filepath.Join(dir, "copies", "a.json"), changed.Write(t, filepath.Join(dir, "changed.json"))},
			"", "with different values"},
	} {
		t.Run(c.name, func(t *testing.T) {
			paths := c.files
			if c.name == "two copies in a directory" {
				paths = []string{filepath.Join(dir, "copies")}
			}
			w, err := calibrate.ReadAnswers(paths, calibrate.Selector{})
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) || !strings.Contains(err.Error(), "changed.json") || !strings.Contains(err.Error(), "a.json") {
					t.Fatalf("error %v, want one saying %q and naming both files", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.note != "" && !slices.ContainsFunc(w.Notes, func(n string) bool { return strings.Contains(n, c.note) }) {
				t.Errorf("notes %q, want one saying %q", w.Notes, c.note)
			}
			r, err := calibrate.Fit(w, nil)
			if err != nil {
				t.Fatal(err)
			}
			if r.Rate.V != want.Rate.V || r.Capacity.V != want.Capacity.V || r.Workers.V != want.Workers.V {
				t.Errorf("rate %g, capacity %g, workers %g; haproxy.json alone gives %g, %g, %g",
					r.Rate.V, r.Capacity.V, r.Workers.V, want.Rate.V, want.Capacity.V, want.Workers.V)
			}
			if c.note != "" && !slices.ContainsFunc(r.Notes, func(n string) bool { return strings.Contains(n, c.note) }) {
				t.Errorf("the fit's notes %q do not carry the window's", r.Notes)
			}
		})
	}
}

// TestGapIsUnknown: samples missing from every series (the scrapes a
// target failed) leave their steps unknown: no step's rate is the
// counters' increase over the gap (issue 37: a 20-step gap made a step of
// 21 times the base rate), the rates and the capacity are those of the
// known steps, and the notes say how much of the window is missing.
func TestGapIsUnknown(t *testing.T) {
	orig := promtest.ReadAnswer(t, "testdata/haproxy.json")
	want := fitFiles(t, "testdata/haproxy.json")
	for _, g := range []struct{ from, to, unknown int }{{60, 66, 7}, {60, 80, 21}} {
		gap := orig.Edited(func(s promtest.AnswerSeries) promtest.AnswerSeries {
			s.Values = append(s.Values[:g.from:g.from], s.Values[g.to:]...)
			return s
		})
		r := fitFiles(t, gap.Write(t, filepath.Join(t.TempDir(), "gap.json")))
		peak := slices.MaxFunc(r.RateSeries, func(a, b calibrate.Sample) int { return cmp.Compare(a.V, b.V) }).V
		if peak > 1.5*want.Rate.V {
			t.Errorf("gap %d-%d: a step of %.4g intents/s, %.1f times the base rate %.4g", g.from, g.to-1, peak, peak/want.Rate.V, want.Rate.V)
		}
		for _, c := range []struct {
			what      string
			got, want float64
		}{{"rate", r.Rate.V, want.Rate.V}, {"attempts/s", r.Attempts.V, want.Attempts.V}, {"capacity", r.Capacity.V, want.Capacity.V}} {
			if c.got < 0.97*c.want || c.got > 1.03*c.want {
				t.Errorf("gap %d-%d: %s %.4g, %.4g without the gap", g.from, g.to-1, c.what, c.got, c.want)
			}
		}
		if len(r.RateSeries) != len(want.RateSeries)-g.unknown {
			t.Errorf("gap %d-%d: %d steps, want %d known", g.from, g.to-1, len(r.RateSeries), len(want.RateSeries)-g.unknown)
		}
		if !slices.ContainsFunc(r.Notes, func(n string) bool { return strings.Contains(n, "are unknown") }) || r.Missing <= 0 {
			t.Errorf("gap %d-%d: missing %.3g, notes %q: want them to say how much is missing", g.from, g.to-1, r.Missing, r.Notes)
		}
	}
}

// TestAbsurdGauges: a gauge of requests below 0, or a limit or a mean
// latency so small that it makes no worker or a capacity of millions, is
// an error that names the metric (ErrFit: exit 2), never a fit and never
// "calibrate wrote a scenario it cannot read back (a bug; please report
// it)" (issue 37: a limit of 1e-9 made 0 workers and that message, and a
// negative replica gauge was written as -5 healthy replicas).
func TestAbsurdGauges(t *testing.T) {
	orig := promtest.ReadAnswer(t, "testdata/haproxy.json")
	for _, c := range []struct {
		metric, value, want string
	}{
		{"haproxy_server_limit_sessions", "1e-9", "fewer than one"},
		{"haproxy_server_limit_sessions", "-5", "never negative"},
		{"haproxy_server_current_sessions", "-5", "never negative"},
		{"haproxy_backend_current_queue", "-1e-9", "never negative"},
		{"haproxy_backend_active_servers", "-5", "never negative"},
		{"haproxy_backend_response_time_average_seconds", "1e-9", "not a service time"},
		{"haproxy_backend_response_time_average_seconds", "-0.05", "not a service time"},
	} {
		t.Run(c.metric+"="+c.value, func(t *testing.T) {
			a := orig.Edited(func(s promtest.AnswerSeries) promtest.AnswerSeries {
				if s.Metric["__name__"] == c.metric {
					for i := range s.Values {
						s.Values[i][1] = c.value
					}
				}
				return s
			})
			file := a.Write(t, filepath.Join(t.TempDir(), "absurd.json"))
			w, err := calibrate.ReadAnswers([]string{file}, calibrate.Selector{})
			if err != nil {
				t.Fatal(err)
			}
			r, err := calibrate.Fit(w, nil)
			if err == nil {
				_, err = calibrate.Write(r, "")
				t.Fatalf("fitted: capacity %g, workers %g, replicas %g; Write: %v", r.Capacity.V, r.Workers.V, r.Replicas.V, err)
			}
			if !errors.Is(err, calibrate.ErrFit) || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), c.metric) {
				t.Errorf("error %v: want ErrFit naming %s and saying %q", err, c.metric, c.want)
			}
		})
	}
}
