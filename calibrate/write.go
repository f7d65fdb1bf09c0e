package calibrate

import (
	"bytes"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/retrystorm/retrystorm/importer"
	"github.com/retrystorm/retrystorm/internal/safetext"
	"github.com/retrystorm/retrystorm/scenario"
)

// Output is a written calibration: the scenario file, and the rate series
// it names when the rate varied.
type Output struct {
	YAML []byte
	// CSV is the rate series, to write as SeriesFile beside the scenario;
	// nil when the rate was steady.
	CSV        []byte
	SeriesFile string
}

// Write writes r as a scenario file that run, check, advise and lab
// accept. file is where it will be written ("" for standard output): a
// varying rate is written as a series beside it, and without a file the
// steady median is written instead, with a note. The file is parsed back
// before it is returned: a file Parse refuses is an error here, never
// written.
func Write(r *Result, file string) (*Output, error) {
	var b yamlWriter
	writeHeader(&b, r)
	b.line(0, "name", "calibrated", "")
	b.line(0, "seed", "1", "")
	out := &Output{}
	writeTraffic(&b, r, file, out)
	writeOrigin(&b, r)
	if r.Config != nil {
		if err := configFleet(&b, r); err != nil {
			return nil, err
		}
		return finish(&b, out, file)
	}
	writeFleet(&b, r)
	return finish(&b, out, file)
}

// writeHeader writes the comments that open the file: where r came from,
// and what its config and its metrics disagree on.
func writeHeader(b *yamlWriter, r *Result) {
	w := r.Window
	b.comment(0, "Calibrated by retrystorm calibrate from %s metrics.", r.Source.Name)
	b.comment(0, "Window: %s.", w.Describe())
	b.comment(0, "Every value below says where it came from; \"default\" marks what the")
	b.comment(0, "metrics cannot show, with the value used: check those before you trust a verdict.")
	for _, n := range r.Notes {
		b.comment(0, "%s.", n)
	}
	if r.Config != nil {
		b.comment(0, "The client policy is the config's, %s (%s): each of its values says the file and line it came from; the metrics give the traffic, the origin and the client instances.", r.Config.Fleet.Origin, r.Config.Fleet.Format)
		if len(r.Disagreements) > 0 {
			b.comment(0, "Warning: the config and the metrics disagree (the config's values are written):")
			for _, d := range r.Disagreements {
				b.comment(0, "- %s: %s.", d.Setting, d.Text)
			}
		}
	}
}

// writeTraffic writes the duration, the tick and the traffic: r's rate
// series, into out's CSV beside file, or its median without a file or
// when the rate was steady.
func writeTraffic(b *yamlWriter, r *Result, file string, out *Output) {
	w := r.Window
	tick, duration := time.Second, 120*time.Second
	series := !r.Steady && file != ""
	var extended bool
	if series {
		tick = max(time.Second, w.Step.Round(time.Second))
		out.SeriesFile = strings.TrimSuffix(filepath.Base(file), filepath.Ext(file)) + ".rates.csv"
		out.CSV, duration, extended = rateCSV(r, tick)
		what := "the window's steps, one tick each"
		if extended {
			what += fmt.Sprintf(", then its median rate to %s: check and advise put their faults from 30s on", dur(duration))
		}
		b.line(0, "duration", dur(duration), what)
		b.line(0, "tick", dur(tick), "the window's step")
	} else {
		b.line(0, "duration", dur(duration), "default: two minutes, the storm's, to try faults in (check and advise bring their own)")
		b.line(0, "tick", dur(tick), "default")
	}
	if peak := quantile(rateValues(r.RateSeries), 1); series && peak > 0.975*r.Capacity.V {
		b.comment(0, "The rate peaks at %.4g intents/s, %.0f%% of the capacity: check and advise take the peak for the base load and refuse one past 97.5%%; give them --load SHARE, the share of the capacity you call realistic.", peak, 100*peak/r.Capacity.V)
	}
	if extended {
		b.comment(0, "The window is shorter than two minutes: its series goes on at its median rate (%.4g intents/s) after it, so that check and advise, whose faults begin at 30s, run it as written.", r.Rate.V)
	}
	b.open(0, "traffic")
	if series {
		b.open(2, "series")
		note := "the rate varied: " + r.Rate.Note
		if r.SeriesNote != "" {
			note += "; " + r.SeriesNote
		}
		b.line(4, "file", out.SeriesFile, note)
	} else {
		note := r.Rate.Note
		if !r.Steady {
			note += "; the rate varied, and only its median is written here: give -o FILE to get the series as traffic.series"
		}
		b.line(2, "rate", num(roundTo(r.Rate.V, 4)), note)
	}
	b.line(2, "arrivals", "poisson", "default: the metrics show rates per step, not arrivals; Poisson is the usual open-loop model")
	b.line(2, "clients", strconv.Itoa(int(r.Clients.V)), r.Clients.Note)
}

// writeOrigin writes the origin as r fitted it.
func writeOrigin(b *yamlWriter, r *Result) {
	b.open(0, "origin")
	b.line(2, "model", "queue", "workers in parallel with a FIFO queue")
	b.line(2, "capacity", num(r.Capacity.V), r.Capacity.Note+knownNote(r.Capacity))
	b.line(2, "workers", strconv.Itoa(int(r.Workers.V)), r.Workers.Note+knownNote(r.Workers))
	b.line(2, "queue_limit", "0", "default: unbounded (no metric shows a bound)")
	b.line(2, "error_rate", num(r.ErrorRate.V), r.ErrorRate.Note)
	serviceTime(b, r)
	if r.Replicas.Known {
		b.comment(2, "Replicas: %s; %s (%.0f).", r.Source.Name, r.Replicas.Note, r.Replicas.V)
	}
}

// writeFleet writes the one fleet calibrated from the metrics alone,
// with the defaults they cannot show.
func writeFleet(b *yamlWriter, r *Result) {
	b.line(0, "fleets", "", "")
	b.raw("  - name: calibrated\n")
	to := time.Duration(r.Timeout.V * float64(time.Second))
	b.line(4, "timeout", dur(to), r.Timeout.Note+knownNote(r.Timeout))
	if r.TimedOut.Known {
		b.comment(4, "Timed out: %.3g%% of the attempts (%s).", 100*r.TimedOut.V, r.TimedOut.Note)
	}
	if r.RetryShare.Known {
		b.comment(4, "Retries per intent seen: %.4g (%s).", r.RetryShare.V, r.RetryShare.Note)
	} else {
		b.comment(4, "Retries per intent: unknown (%s).", r.RetryShare.Note)
	}
	b.open(4, "retry")
	b.line(6, "max_retries", strconv.Itoa(int(r.MaxRetries.V)), r.MaxRetries.Note)
	b.open(6, "backoff")
	b.line(8, "use", "exponential", "default: no metric shows the backoff; 25ms doubling to 250ms, jittered, as most libraries")
	b.line(8, "base", "25ms", "")
	b.line(8, "cap", "250ms", "")
	b.line(8, "jitter", "full", "")
	b.open(4, "budget")
	if r.HasBudget {
		b.line(6, "use", "token_bucket", r.Budget.Note)
		b.open(6, "settings")
		ratio := "fitted: see above"
		if !r.Budget.Known {
			ratio = "default: see above"
		}
		b.line(8, "budget_ratio", num(r.Budget.V), ratio)
		b.line(8, "min_tokens", "10", "default: resil's and Finagle's floor")
		b.line(8, "max_tokens", "100", "default")
	} else {
		b.line(6, "use", "none", r.Budget.Note)
	}
	b.open(4, "breaker")
	if r.Breaker {
		b.line(6, "use", "consecutive", r.BreakerNte)
		b.open(6, "settings")
		b.line(8, "threshold", "5", "default")
		b.line(8, "cooldown", "5s", "default")
	} else {
		b.line(6, "use", "none", r.BreakerNte)
	}
}

// MinSeriesRun is the shortest run a calibrated rate series is written
// for: check's and advise's envelope, whose faults begin at 30s.
const MinSeriesRun = 2 * time.Minute

// rateCSV writes r's rate series, one row per known step at its time from
// the first (a gap's steps have none: the run interpolates across it), at
// most 100,000 rows; a window shorter than MinSeriesRun goes on at its
// median rate to it (extended). It returns the CSV and the run's duration.
func rateCSV(r *Result, tick time.Duration) (csv []byte, duration time.Duration, extended bool) {
	var b bytes.Buffer
	w := r.Window
	fmt.Fprintf(&b, "# intents per second per step of %s, from %s\n", w.Step, w.Describe())
	if r.SeriesNote != "" {
		fmt.Fprintf(&b, "# %s\n", r.SeriesNote)
	}
	b.WriteString("seconds,rate\n")
	at := func(k int64) int64 { return k * int64(tick/time.Second) }
	var last int64
	for i, p := range r.RateSeries[:min(len(r.RateSeries), 100_000)] {
		k := int64(math.Round(float64(p.T.Sub(r.RateSeries[0].T)) / float64(w.Step)))
		if i > 0 && k <= last {
			continue
		}
		last = k
		fmt.Fprintf(&b, "%d,%s\n", at(k), num(roundTo(p.V, 6)))
	}
	duration = time.Duration(last+1) * tick
	if duration < MinSeriesRun {
		med := num(roundTo(r.Rate.V, 6))
		fmt.Fprintf(&b, "# the window ends: its median rate from here on, to %s\n", dur(MinSeriesRun))
		fmt.Fprintf(&b, "%d,%s\n", at(last+1), med)
		duration = MinSeriesRun.Round(tick)
		if end := int64((duration - tick) / time.Second); end > at(last+1) {
			fmt.Fprintf(&b, "%d,%s\n", end, med)
		}
		extended = true
	}
	return b.Bytes(), duration, extended
}

// finish sets out's YAML to b's and parses it back.
func finish(b *yamlWriter, out *Output, file string) (*Output, error) {
	out.YAML = b.Bytes()
	if err := check(out, file); err != nil {
		return nil, err
	}
	return out, nil
}

// configFleet writes the fleet of r.Config as a scenario file writes it
// (importer.Export), each of its keys under the comments of where its
// settings came from, FILE:LINE where the config sets them, and what the
// metrics showed of them.
func configFleet(b *yamlWriter, r *Result) error {
	c := r.Config
	text, _, err := importer.Export(c.Fleet.Fleet, importer.ScenarioFleet)
	if err != nil {
		return err
	}
	var head []string
	keys := map[string]bool{}
	for _, l := range strings.Split(text, "\n") {
		if k, ok := fleetKey(l); ok {
			keys[k] = true
		}
	}
	for _, p := range c.provenances() {
		if !slices.ContainsFunc(p.keys(), func(k string) bool { return keys[k] }) {
			head = append(head, p.String())
		}
	}
	b.line(0, "fleets", "", "")
	b.comment(2, "The client policy: %s (%s), as retrystorm import reads it.", c.Fleet.Origin, c.Fleet.Format)
	for _, h := range head {
		b.comment(2, "%s.", h)
	}
	if r.TimedOut.Known {
		b.comment(2, "Timed out: %.3g%% of the attempts (%s).", 100*r.TimedOut.V, r.TimedOut.Note)
	}
	if r.RetryShare.Known {
		b.comment(2, "Retries per intent seen: %.4g (%s).", r.RetryShare.V, r.RetryShare.Note)
	}
	for _, l := range c.Fleet.Lost {
		b.comment(2, "Not represented: %s.", l)
	}
	for _, l := range strings.Split(strings.TrimSuffix(text, "\n"), "\n")[1:] {
		if k, ok := fleetKey(l); ok && k != "name" {
			for _, n := range c.notes(k) {
				b.comment(4, "%s", n)
			}
			for _, d := range r.Disagreements {
				if d.Setting == k {
					b.comment(4, "The metrics disagree: %s.", d.Text)
				}
			}
		}
		b.raw(l + "\n")
	}
	return nil
}

// fleetKey is the key of a line of a fleet's own (indented four columns),
// or of its first ("  - name:").
func fleetKey(l string) (string, bool) {
	if rest, ok := strings.CutPrefix(l, "  - "); ok {
		k, _, ok := strings.Cut(rest, ":")
		return k, ok
	}
	if rest, ok := strings.CutPrefix(l, "    "); ok && rest != "" && rest[0] != ' ' && rest[0] != '#' {
		k, _, ok := strings.Cut(rest, ":")
		return k, ok
	}
	return "", false
}

// serviceTime writes origin.service_time: the fitted distribution with
// its scale, which the capacity above agrees with (workers / its mean).
func serviceTime(b *yamlWriter, r *Result) {
	f, st := r.Service, r.ServiceTime
	b.comment(2, "Service time: mean %s, median %s; %s.", sec(f.Mean), sec(f.Median), r.ServiceNte)
	if st.Dist == scenario.DistEmpirical {
		b.comment(2, "The buckets' own mean, %s (each bucket's share at its middle), sets the capacity above; the histogram's exact mean is %s.", sec(r.Scale), sec(f.Mean))
	}
	b.open(2, "service_time")
	if st.Dist != scenario.DistEmpirical {
		// The scale (mean, median) is left to the model, workers /
		// capacity, which is the fitted one: check and advise rescale the
		// capacity to try other loads, and a scale written here would then
		// contradict it.
		b.comment(4, "The shape only: its mean is the model's, workers / capacity = %s, the fitted mean (written here, the scale would stop check and advise from rescaling the capacity).", sec(r.Scale))
	}
	b.line(4, "dist", st.Dist, "")
	switch st.Dist {
	case scenario.DistLognormal:
		b.line(4, "sigma", num(st.Sigma), "")
	case scenario.DistEmpirical:
		b.line(4, "buckets", "", "")
		for _, x := range st.Buckets {
			le := x.Le.String()
			if x.Le == scenario.Inf {
				le = "+Inf"
			}
			b.raw(fmt.Sprintf("      - {le: %s, fraction: %s}\n", le, num(x.Fraction)))
		}
	}
}

func distText(f ServiceFit) string {
	switch f.Dist {
	case "lognormal":
		return fmt.Sprintf("lognormal with sigma %.3g", f.Sigma)
	case "empirical":
		return fmt.Sprintf("empirical over %d buckets", len(f.Buckets.Le))
	}
	return f.Dist
}

func knownNote(v Value) string {
	if v.Known {
		return ""
	}
	return " (default)"
}

// check parses the file back, as run and check will: a scenario this
// package writes must be one they accept.
func check(out *Output, file string) error {
	dir, err := tempDir()
	if err != nil {
		return err
	}
	defer removeAll(dir)
	name := filepath.Join(dir, "calibrated.yaml")
	if out.CSV != nil {
		if err := writeFile(filepath.Join(dir, out.SeriesFile), out.CSV); err != nil {
			return err
		}
	}
	if err := writeFile(name, out.YAML); err != nil {
		return err
	}
	if _, err := scenario.Load(name); err != nil {
		return fmt.Errorf("calibrate wrote a scenario it cannot read back (a bug; please report it): %v", err)
	}
	return nil
}

// yamlWriter writes block-style YAML with a comment above each value.
type yamlWriter struct{ bytes.Buffer }

func (b *yamlWriter) comment(indent int, format string, args ...any) {
	text := fmt.Sprintf(format, args...)
	for _, l := range wrap(text, 78-indent) {
		fmt.Fprintf(b, "%s# %s\n", strings.Repeat(" ", indent), safetext.Escape(l))
	}
}

func (b *yamlWriter) line(indent int, key, value, note string) {
	if note != "" {
		b.comment(indent, "%s", note)
	}
	if value == "" {
		fmt.Fprintf(b, "%s%s:\n", strings.Repeat(" ", indent), key)
		return
	}
	fmt.Fprintf(b, "%s%s: %s\n", strings.Repeat(" ", indent), key, value)
}

func (b *yamlWriter) open(indent int, key string) { b.line(indent, key, "", "") }
func (b *yamlWriter) raw(s string)                { b.WriteString(s) }

// wrap breaks text into lines of at most width columns, at spaces.
func wrap(text string, width int) []string {
	var out []string
	line := ""
	for _, w := range strings.Fields(text) {
		if line != "" && len(line)+1+len(w) > width {
			out = append(out, line)
			line = ""
		}
		if line != "" {
			line += " "
		}
		line += w
	}
	if line != "" {
		out = append(out, line)
	}
	return out
}

func num(x float64) string {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return "0"
	}
	return strconv.FormatFloat(x, 'g', -1, 64)
}

func dur(d time.Duration) string {
	if d%time.Second == 0 {
		return strconv.FormatInt(int64(d/time.Second), 10) + "s"
	}
	return strconv.FormatInt(d.Milliseconds(), 10) + "ms"
}
