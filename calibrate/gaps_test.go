package calibrate_test

import (
	"cmp"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/retrystorm/retrystorm/calibrate"
)

// TestGapIsUnknown: samples missing from every series (the scrapes a
// target failed) leave their steps unknown: no step's rate is the
// counters' increase over the gap (issue 37: a 20-step gap made a step of
// 21 times the base rate), the rates and the capacity are those of the
// known steps, and the notes say how much of the window is missing.
func TestGapIsUnknown(t *testing.T) {
	orig := readAnswerFile(t, "testdata/haproxy.json")
	whole, err := calibrate.ReadAnswers([]string{"testdata/haproxy.json"}, calibrate.Selector{})
	if err != nil {
		t.Fatal(err)
	}
	want, err := calibrate.Fit(whole, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range []struct{ from, to, unknown int }{{60, 66, 7}, {60, 80, 21}} {
		gap := orig.edited(func(v [][2]any) [][2]any { return append(v[:g.from:g.from], v[g.to:]...) })
		file := gap.write(t, filepath.Join(t.TempDir(), "gap.json"))
		w, err := calibrate.ReadAnswers([]string{file}, calibrate.Selector{})
		if err != nil {
			t.Fatal(err)
		}
		r, err := calibrate.Fit(w, nil)
		if err != nil {
			t.Fatal(err)
		}
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
