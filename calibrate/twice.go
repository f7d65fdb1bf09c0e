package calibrate

import (
	"cmp"
	"fmt"
	"slices"
	"time"
)

// A series may come twice: two copies of one saved window in a directory,
// or two parts of one window saved apart. Added up, the copies would
// double every rate and the capacity (issue 37), so the window holds each
// series (its metric and labels) once: a copy that repeats what is there
// is dropped, parts are joined, and two that disagree at a time are
// refused. Window.Notes says which.

// inOrder sorts samples by time, drops a sample that repeats the one
// before it at the same time, and refuses two different values at one
// time: Prometheus answers in time order, but a file may be edited or
// written by other tools, and in reverse order the window's step came out
// negative ("every series has one sample").
func inOrder(name string, s Series) (Series, error) {
	p := s.Samples
	if !slices.IsSortedFunc(p, bySampleTime) {
		slices.SortStableFunc(p, bySampleTime)
	}
	out := p[:0]
	for i, x := range p {
		if i > 0 && x.T.Equal(out[len(out)-1].T) {
			if x.V != out[len(out)-1].V {
				return s, fmt.Errorf("%s%s has two samples at %s: %g and %g", name, s.Labels, x.T.Format(time.RFC3339Nano), out[len(out)-1].V, x.V)
			}
			continue
		}
		out = append(out, x)
	}
	s.Samples = out
	return s, nil
}

func bySampleTime(a, b Sample) int { return a.T.Compare(b.T) }

// join merges b's samples into a's, both in time order: the union, and
// whether b added any. Two different values at one time are an error.
func join(name string, a, b Series) (Series, bool, error) {
	out := make([]Sample, 0, max(len(a.Samples), len(b.Samples)))
	added := false
	i, j := 0, 0
	for i < len(a.Samples) || j < len(b.Samples) {
		switch {
		case j == len(b.Samples):
			out = append(out, a.Samples[i])
			i++
		case i == len(a.Samples):
			out = append(out, b.Samples[j])
			j, added = j+1, true
		default:
			x, y := a.Samples[i], b.Samples[j]
			switch c := x.T.Compare(y.T); {
			case c < 0:
				out = append(out, x)
				i++
			case c > 0:
				out = append(out, y)
				j, added = j+1, true
			case x.V != y.V:
				return a, false, fmt.Errorf("%s%s at %s: %g in one, %g in the other", name, a.Labels, x.T.Format(time.RFC3339Nano), x.V, y.V)
			default:
				out = append(out, x)
				i, j = i+1, j+1
			}
		}
	}
	a.Samples = out
	return a, added, nil
}

// twice counts the series a source repeated, by the source it repeated
// (identical copies, or parts joined), for Window.Notes.
type twice struct {
	of, in string // where the series came first, and again
	joined bool
}

// addSeries adds s of metric name, read from where, to w: once, whatever
// the copies (see above).
func (w *Window) addSeries(name string, s Series, where string) error {
	s, err := inOrder(name, s)
	if err != nil {
		return err
	}
	key := name + s.Labels.String()
	i, seen := w.index[key]
	if !seen {
		if len(w.Series[name]) >= MaxSeries {
			return fmt.Errorf("%s has more than %d series: narrow the selector (a job, a cluster, a service) so that it matches one service", name, MaxSeries)
		}
		if w.index == nil {
			w.index, w.from = map[string]int{}, map[string]string{}
		}
		w.index[key], w.from[key] = len(w.Series[name]), where
		w.Series[name] = append(w.Series[name], s)
		return nil
	}
	j, added, err := join(name, w.Series[name][i], s)
	if err != nil {
		return fmt.Errorf("a series is twice in the window, with different values: %v (in %s and %s): one series of two windows or two servers; give one of them", err, w.from[key], where)
	}
	w.Series[name][i] = j
	if w.twice == nil {
		w.twice = map[twice]int{}
	}
	w.twice[twice{of: w.from[key], in: where, joined: added}]++
	return nil
}

// twiceNotes says which series came twice, and what was done.
func (w *Window) twiceNotes() []string {
	keys := make([]twice, 0, len(w.twice))
	for k := range w.twice {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b twice) int {
		return cmp.Or(cmp.Compare(a.of, b.of), cmp.Compare(a.in, b.in), cmp.Compare(fmt.Sprint(a.joined), fmt.Sprint(b.joined)))
	})
	var out []string
	for _, k := range keys {
		n := w.twice[k]
		what := fmt.Sprintf("%d series of %s %s again in %s", n, k.of, plural(n, "is", "are"), k.in)
		if k.joined {
			out = append(out, what+": the samples they share agree, so each series is read once, its samples joined")
		} else {
			out = append(out, what+", identical: each is counted once, not added up")
		}
	}
	return out
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
