package calibrate_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/retrystorm/retrystorm/calibrate"
)

// answerFile is a saved query_range answer, as the tests edit it.
type answerFile struct {
	Status string `json:"status"`
	Data   struct {
		ResultType string `json:"resultType"`
		Result     []struct {
			Metric map[string]string `json:"metric"`
			Values [][2]any          `json:"values"`
		} `json:"result"`
	} `json:"data"`
}

func readAnswerFile(t *testing.T, file string) answerFile {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var a answerFile
	if err := json.Unmarshal(data, &a); err != nil {
		t.Fatal(err)
	}
	return a
}

func (a answerFile) write(t *testing.T, file string) string {
	t.Helper()
	b, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return file
}

// edited is a deep copy of a with edit applied to each series' values.
func (a answerFile) edited(edit func(v [][2]any) [][2]any) answerFile {
	out := a
	out.Data.Result = slices.Clone(a.Data.Result)
	for i := range out.Data.Result {
		out.Data.Result[i].Values = edit(slices.Clone(a.Data.Result[i].Values))
	}
	return out
}

// TestSeriesTwice: a series that comes twice is held once (issue 37: two
// copies of one saved window in --file DIR doubled the rate and the
// capacity), and the window's notes say which; two parts of one window
// are joined; two copies that disagree are refused, naming both files;
// samples in reverse order are read in time order (they gave "every
// series has one sample"). Each fits as haproxy.json alone.
func TestSeriesTwice(t *testing.T) {
	orig := readAnswerFile(t, "testdata/haproxy.json")
	one, err := calibrate.ReadAnswers([]string{"testdata/haproxy.json"}, calibrate.Selector{})
	if err != nil {
		t.Fatal(err)
	}
	want, err := calibrate.Fit(one, nil)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	half := func(first bool) func(v [][2]any) [][2]any {
		return func(v [][2]any) [][2]any {
			if first {
				return v[:len(v)/2+1] // one sample in common
			}
			return v[len(v)/2:]
		}
	}
	reversed := func(v [][2]any) [][2]any { slices.Reverse(v); return v }
	changed := orig.edited(func(v [][2]any) [][2]any { v[7][1] = "1"; return v })
	for _, c := range []struct {
		name  string
		files []string
		note  string // a window note that must be there
		err   string // or the error
	}{
		{"two copies in a directory", []string{orig.write(t, filepath.Join(dir, "copies", "a.json")), orig.write(t, filepath.Join(dir, "copies", "b.json"))},
			"15 series of " + filepath.Join(dir, "copies", "a.json") + " are again in " + filepath.Join(dir, "copies", "b.json") + ", identical: each is counted once", ""},
		{"two halves", []string{orig.edited(half(true)).write(t, filepath.Join(dir, "first.json")), orig.edited(half(false)).write(t, filepath.Join(dir, "second.json"))},
			"each series is read once, its samples joined", ""},
		{"reverse order", []string{orig.edited(reversed).write(t, filepath.Join(dir, "reversed.json"))}, "", ""},
		{"copies that differ", []string{filepath.Join(dir, "copies", "a.json"), changed.write(t, filepath.Join(dir, "changed.json"))},
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
