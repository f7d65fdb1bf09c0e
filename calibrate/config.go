package calibrate

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/retrystorm/retrystorm/importer"
	"github.com/retrystorm/retrystorm/scenario"
)

// Config is the retry policy of the user's own config file (calibrate
// and replay --config), read by package importer as check and advise
// read it: the fleet, with a line per setting saying where it came from,
// and the files it was read from.
type Config struct {
	Fleet   importer.Fleet
	Sources []importer.Source
}

// Disagreement is a place where the config and the metrics both speak
// and differ: a warning, with both values; the config's value is written.
type Disagreement struct {
	// Setting is the fleet's key it is about: timeout, retry, budget or
	// breaker.
	Setting string `json:"setting"`
	Text    string `json:"text"`
}

// layers lists, for each source, the config formats that describe the
// layer whose retries its metrics count: Envoy's cluster statistics
// count the retries of the Envoy proxy (an Envoy route and cluster, or
// the Istio objects Istio turns into them); gRPC's client metrics the
// retries of the gRPC client (its service config). A scenario file's
// fleet, in the simulator's own words, may describe any layer.
var layers = map[string][]importer.Format{
	"envoy": {importer.Envoy, importer.Istio},
	"grpc":  {importer.GRPC},
}

// layerOf says which layer's retries each source's metrics count, for
// the refusal.
var layerOf = map[string]string{
	"envoy":   "the Envoy proxy's (an Envoy route and cluster, or Istio's VirtualService and DestinationRule)",
	"grpc":    "the gRPC client's (its service config)",
	"haproxy": "HAProxy's (its retries and retry-on, which no importer reads)",
	"resil":   "resil Guards' (set in Go code)",
	"lab":     "the lab gateway's (a scenario's fleet)",
}

// UseConfig writes c's retry policy (timeout, deadline, retries, backoff,
// budget, breaker, throttle, hedging, balancing) in place of the defaults
// the metrics cannot show, and cross-checks it with w (nil: the window
// fitted), where both speak: the retries per intent, over the window and
// step by step, against max_retries, and failures never retried against a
// config that retries them; refused retries or a budget's gauge against
// the config's budget; a breaker's refusals against its breaker; and the
// attempts' latencies and the timeout counters (Envoy's route and per-try
// timeouts apart) against its timeout and deadline. A disagreement is kept in
// r.Disagreements (a warning: the file says it, and the command prints
// it); a config that cannot describe the layer the metrics count (a
// gRPC service config for Envoy's statistics) is an error.
func (r *Result) UseConfig(c *Config, w *Window) error {
	if err := c.Describes(r.Source); err != nil {
		return err
	}
	f := c.Fleet
	if w == nil {
		w = r.Window
	}
	r.Config = c
	fl := f.Fleet
	r.Timeout = Value{V: fl.Timeout.Seconds(), Known: true, Note: c.note("timeout")}
	r.MaxRetries = Value{V: float64(fl.Retry.MaxRetries), Known: true, Note: c.note("retry")}
	r.HasBudget = fl.Budget.Use != scenario.BudgetNone && fl.Budget.Use != ""
	r.Budget = Value{V: fl.Budget.Ratio(), Known: true, Note: c.note("budget")}
	r.Breaker = fl.Breaker.Use != scenario.BreakerNone && fl.Breaker.Use != ""
	r.BreakerNte = c.note("breaker")
	r.Disagreements = crossCheck(r.Source, w, c)
	return nil
}

// Describes returns an error (ErrFit) when c cannot describe the layer
// whose retries src's metrics count.
func (c *Config) Describes(src *Source) error {
	f := c.Fleet
	if f.Format == importer.ScenarioFleet || slices.Contains(layers[src.Name], f.Format) {
		return nil
	}
	var want []string
	for _, x := range layers[src.Name] {
		want = append(want, article(string(x))+" config")
	}
	want = append(want, "a scenario file's fleet")
	return fail("--config: %s is %s config, which cannot describe the layer %s's metrics count: their retries are %s; give %s",
		f.Origin, article(string(f.Format)), src.Name, layerOf[src.Name], strings.Join(want, " or "))
}

func article(s string) string {
	if s != "" && strings.ContainsRune("aeiouAEIOU", rune(s[0])) {
		return "an " + s
	}
	return "a " + s
}

// crossCheck compares the config with what the window shows of the
// policy in force.
func crossCheck(src *Source, w *Window, c *Config) []Disagreement {
	x := &crossChecker{src: src, w: w, c: c}
	x.retries()
	x.limits()
	x.timeouts()
	return x.out
}

// crossChecker collects what config c and the metrics of src in window w
// disagree on.
type crossChecker struct {
	src *Source
	w   *Window
	c   *Config
	out []Disagreement
}

// q is the query that reads r in the window.
func (x *crossChecker) q(r Ref) string {
	if r.Label == "" {
		return x.w.Query(r.Metric)
	}
	return r.String()
}

func (x *crossChecker) add(setting, format string, args ...any) {
	x.out = append(x.out, Disagreement{Setting: setting, Text: fmt.Sprintf(format, args...)})
}

// retries checks the config's retries against the retries the metrics
// show.
func (x *crossChecker) retries() {
	src, w, c, fl := x.src, x.w, x.c, x.c.Fleet.Fleet
	// Retries: no intent can be retried more than max_retries times (a
	// hedge is one more attempt, counted as a retry where retries are
	// attempts less calls); a hundredth of an intent is left for the
	// window's edges, whose retries belong to intents begun outside it.
	// Over the window first; then step by step, which catches a policy
	// that retried more only while something failed, the window's mean
	// diluted by the quiet steps.
	if w.Has(src.Attempts.Metric) && fl.Retry.MaxRetries >= 0 {
		att := Counter(w, src.Attempts)
		intents, retries, query := retrySteps(w, src, att, x.q)
		allowed := fl.Retry.MaxRetries + max(0, fl.Hedge.Max)
		if share, ok := retryShare(w, src, att, intents, retries, query); ok {
			if share > float64(allowed)+0.01 {
				x.add("retry", "the metrics show %.3g retries per intent (%s over the intents), more than the config allows, retry.max_retries %d%s (%s): the metrics may be of another route, or another layer retries too",
					share, query, fl.Retry.MaxRetries, hedged(fl), c.where("retry.max_retries"))
			} else if p, ok := peakRetries(intents, retries, allowed, span(fl), w.Step); ok {
				x.add("retry", "in the %s to %s the metrics show %.0f retries (%s) for %.0f intents begun in it and the %s before, as long as an intent can last (the config's %s): %.3g per intent, more than retry.max_retries %d%s allows (%s): the metrics may be of another route, or another layer retries too",
					dur(w.Step), p.at.UTC().Format(time.RFC3339), p.retries, query, p.intents, dur(p.back), p.spanWhy, p.retries/p.intents, fl.Retry.MaxRetries, hedged(fl), c.where("retry.max_retries"))
			}
		}
		// A config that retries while the metrics show none: failures the
		// config would retry happened, and no retry followed nor was
		// refused. (An intent its deadline ended is not retried: Envoy's
		// route timeouts, counted apart, are left out.)
		if query != "" && fl.Retry.MaxRetries != 0 && !fl.Retry.IdempotentOnly && retries.total() <= 0 && retriesFailures(fl.Retry) {
			failed, what := 0.0, ""
			if src.Errors.ok() && w.Has(src.Errors.Metric) {
				failed, what = Counter(w, src.Errors).total(), x.q(src.Errors)
			}
			if src.PerTryTimeouts.ok() && src.Timeouts.ok() && w.Has(src.Timeouts.Metric) {
				failed -= Counter(w, src.Timeouts).total()
				what += " less " + x.q(src.Timeouts)
			}
			refused := 0.0
			if src.RetryOverflow.ok() && w.Has(src.RetryOverflow.Metric) {
				refused = Counter(w, src.RetryOverflow).total()
			}
			if failed >= minFailed && refused <= 0 {
				x.add("retry", "the config retries (retry.max_retries %s, %s; retry.on %s, %s), but the metrics show no retry (%s flat, none refused) while %.0f attempts failed (%s): the config's retry.on may not match what failed, or it is not the policy in force",
					maxRetries(fl.Retry.MaxRetries), c.where("retry.max_retries"), retryOn(fl.Retry), c.where("retry.on"), query, failed, what)
			}
		}
	}
}

// limits checks a budget and a breaker that the metrics show and the
// config does not have.
func (x *crossChecker) limits() {
	src, w, c, fl := x.src, x.w, x.c, x.c.Fleet.Fleet
	// A budget: refused retries, or a budget's own gauge, where the
	// config has none.
	if fl.Budget.Use == scenario.BudgetNone || fl.Budget.Use == "" {
		if src.RetryOverflow.ok() && w.Has(src.RetryOverflow.Metric) {
			if n := Counter(w, src.RetryOverflow).total(); n > 0 {
				x.add("budget", "%s counted %.0f refused retries, but the config has no retry budget nor any limit on retries (budget: none, %s)", x.q(src.RetryOverflow), n, c.where("budget"))
			}
		}
		if src.Budget.ok() && w.Has(src.Budget.Metric) {
			x.add("budget", "%s is exported, as only a retry budget exports it, but the config has none (budget: none, %s)", x.q(src.Budget), c.where("budget"))
		}
	}

	// A breaker that refused calls, where the config has none.
	if (fl.Breaker.Use == scenario.BreakerNone || fl.Breaker.Use == "") && src.BreakerRefusals.ok() && w.Has(src.BreakerRefusals.Metric) {
		if n := Counter(w, src.BreakerRefusals).total(); n > 0 {
			x.add("breaker", "%s counted %.0f calls a breaker refused, but the config has no breaker (breaker: none, %s)", x.q(src.BreakerRefusals), n, c.where("breaker"))
		}
	}
}

// timeouts checks the config's timeouts against the latency and the
// timeouts the metrics show.
func (x *crossChecker) timeouts() {
	src, w, c, fl := x.src, x.w, x.c, x.c.Fleet.Fleet
	// The timeout. Where the latency is measured at the client (the
	// proxy, the library), no answer can take longer than the attempt's
	// timeout: answers in buckets wholly above it say a longer one is in
	// force. (A latency measured at the origin may: it serves callers
	// that left.) A thousandth is left for the timers' slack.
	to := fl.Timeout
	if !src.ServerSide && src.Latency.ok() && w.Has(src.Latency.Base+"_bucket") {
		b := Histogram(w, src.Latency, nil)
		if k := slices.IndexFunc(b.Le, func(le float64) bool { return le >= to.Seconds() }); k >= 0 && b.Count > 0 {
			if above := (b.Count - b.Cum[k]) / b.Count; above > 0.001 {
				x.add("timeout", "%.3g%% of the attempts took longer than %s (%s_bucket), past the config's per-attempt timeout of %s (%s): a longer timeout is in force",
					100*above, sec(b.Le[k]), src.Latency.Base, dur(to), c.where("timeout"))
			}
		}
	}
	if src.Timeouts.ok() && !src.PerTryTimeouts.ok() && w.Has(src.Timeouts.Metric) && to >= noTimeout {
		if n := Counter(w, src.Timeouts).total(); n > 0 {
			x.add("timeout", "%s counted %.0f timeouts, but the config sets no timeout (written as %s, the simulator's longest; %s)", x.q(src.Timeouts), n, dur(to), c.where("timeout"))
		}
	}
	// Envoy counts its two timeouts apart (source/common/router/router.cc,
	// Filter::onResponseTimeout and onPerTryTimeoutCommon):
	// upstream_rq_timeout when the route's timeout ends the request,
	// upstream_rq_per_try_timeout when the retry policy's per_try_timeout
	// cuts an attempt; a per_try_timeout not shorter than the route's is
	// ignored (FilterUtility::finalTimeout). The importer writes the
	// route's timeout as the deadline (0s: none) and the per-try one as the
	// timeout (the route's when unset).
	if src.PerTryTimeouts.ok() {
		if src.Timeouts.ok() && w.Has(src.Timeouts.Metric) && fl.Deadline <= 0 {
			if n := Counter(w, src.Timeouts).total(); n > 0 {
				x.add("timeout", "%s counted %.0f requests the route's timeout ended, but the config has no route timeout (deadline: none, %s): a route timeout is in force", x.q(src.Timeouts), n, c.where("deadline"))
			}
		}
		perTry := to < noTimeout && (fl.Deadline <= 0 || to < fl.Deadline)
		if w.Has(src.PerTryTimeouts.Metric) && !perTry {
			if n := Counter(w, src.PerTryTimeouts).total(); n > 0 {
				x.add("timeout", "%s counted %.0f attempts a per-try timeout cut, but the config has none shorter than the route's (timeout %s, %s; deadline %s, %s): a per_try_timeout is in force",
					x.q(src.PerTryTimeouts), n, dur(to), c.where("timeout"), deadline(fl.Deadline), c.where("deadline"))
			}
		}
	}
}

// noTimeout is the timeout the importers write where a config sets none,
// the simulator's longest.
const noTimeout = 24 * time.Hour

// minFailed is how many failed attempts, with no retry, say a config's
// retries are not in force: fewer may be of kinds it does not retry.
const minFailed = 10

// A peak is the step where the retries per intent were highest, over the
// intents an intent's retries can follow.
type peak struct {
	at               time.Time
	retries, intents float64
	back             time.Duration
	spanWhy          string
}

// peakRetries returns the step whose retries exceed allowed for each
// intent begun in it or in the steps before within span (the longest an
// intent can last: its retries cannot come later), if any. The steps
// whose span reaches before the window are left out (their intents are
// not all seen), and so is the whole check when span is unknown. One
// retry and a hundredth of the intents are left for the scrapes' timing.
func peakRetries(intents, retries steps, allowed int, sp spanOf, step time.Duration) (peak, bool) {
	if sp.d <= 0 || step <= 0 {
		return peak{}, false
	}
	k := int((sp.d + step - 1) / step)
	best, found := peak{}, false
	for i := k; i < len(intents.V); i++ {
		r, ok := retries.at(intents.T[i])
		if !ok || intents.T[i].Sub(intents.T[i-k]) != time.Duration(k)*step {
			continue // a gap in the series: the steps before are not all there
		}
		in := 0.0
		for j := i - k; j <= i; j++ {
			in += max(0, intents.V[j])
		}
		if in <= 0 || r <= float64(allowed)*in+1+0.01*in {
			continue
		}
		if !found || r/in > best.retries/best.intents {
			best, found = peak{at: intents.T[i], retries: r, intents: in, back: time.Duration(k) * step, spanWhy: sp.why}, true
		}
	}
	return best, found
}

// spanOf is the longest an intent can last under a fleet's policy, and
// why.
type spanOf struct {
	d   time.Duration
	why string
}

// span: the deadline where there is one, else every attempt's timeout and
// the longest backoff before each retry; unknown (0) where neither
// bounds it.
func span(f scenario.Fleet) spanOf {
	if f.Deadline > 0 {
		return spanOf{f.Deadline, "deadline " + dur(f.Deadline)}
	}
	n, b := f.Retry.MaxRetries, f.Retry.Backoff
	wait := b.Cap // the longest wait before a retry
	switch b.Use {
	case "", "none":
		wait = 0
	case "fixed":
		wait = b.Base
	}
	if f.Timeout >= noTimeout || n < 0 || (n > 0 && wait <= 0 && b.Use != "" && b.Use != "none") {
		return spanOf{}
	}
	d := time.Duration(n+1)*f.Timeout + time.Duration(n)*wait
	return spanOf{d, fmt.Sprintf("%d attempts of timeout %s and their backoff", n+1, dur(f.Timeout))}
}

// retriesFailures reports whether r retries any failure the metrics
// count as one: an error answer, a rejection or a timeout.
func retriesFailures(r scenario.Retry) bool {
	return r.Retries(scenario.RetryOnError) || r.Retries(scenario.RetryOnRejection) || r.Retries(scenario.RetryOnTimeout)
}

func retryOn(r scenario.Retry) string {
	if len(r.On) == 0 {
		return "every failure"
	}
	return strings.Join(r.On, ", ")
}

func maxRetries(n int) string {
	if n < 0 {
		return "unlimited"
	}
	return strconv.Itoa(n)
}

func deadline(d time.Duration) string {
	if d <= 0 {
		return "none"
	}
	return dur(d)
}

func hedged(f scenario.Fleet) string {
	if f.Hedge.Max > 0 {
		return fmt.Sprintf(" and hedge.max %d", f.Hedge.Max)
	}
	return ""
}

// A provenance is one of the fleet's From, with the file and line
// importer.Locate finds it at.
type provenance struct {
	importer.Provenance
	file string // "" when no file of the config sets it (a default)
	line int
}

func (c *Config) provenances() []provenance {
	var out []provenance
	for _, v := range c.Fleet.From {
		p := provenance{Provenance: v}
		p.file, p.line = importer.Locate(c.Sources, v)
		out = append(out, p)
	}
	return out
}

// keys are the fleet's keys a provenance's settings are under: "timeout"
// and "deadline" are both, "retry.backoff.base" is retry.
func (p provenance) keys() []string {
	var out []string
	for _, s := range p.Settings {
		k, _, _ := strings.Cut(s, ".")
		out = append(out, k)
	}
	return out
}

// String writes p as a comment: the setting, its value, and where it
// came from, as FILE:LINE where the config sets it.
func (p provenance) String() string {
	v := strings.Join(p.Settings, " and ")
	if p.Value != importer.AsWritten {
		v += ": " + p.Value
	}
	if p.file == "" {
		return v + ", " + p.Where()
	}
	at := p.file
	if p.line > 0 {
		at += ":" + strconv.Itoa(p.line)
	}
	return fmt.Sprintf("%s, from %s (%s)", v, at, p.At())
}

// notes are the comments for the fleet's key: each of its settings,
// with where it came from.
func (c *Config) notes(key string) []string {
	var out []string
	for _, p := range c.provenances() {
		if slices.Contains(p.keys(), key) {
			out = append(out, p.String())
		}
	}
	if len(out) == 0 {
		return []string{fmt.Sprintf("%s: not in the config; the scenario's default, as import writes it", key)}
	}
	return out
}

// note is notes on one line.
func (c *Config) note(key string) string { return strings.Join(c.notes(key), "; ") }

// where is FILE:LINE of the setting (or of its key), or where its value
// came from when the config does not set it.
func (c *Config) where(setting string) string {
	key, _, _ := strings.Cut(setting, ".")
	var best *provenance
	ps := c.provenances()
	for i, p := range ps {
		for _, s := range p.Settings {
			if s == setting || (best == nil && (s == key || strings.HasPrefix(s, key+"."))) {
				best = &ps[i]
			}
		}
	}
	switch {
	case best == nil:
		return "not set by " + c.Fleet.Origin
	case best.file == "":
		return best.Where()
	case best.line > 0:
		return fmt.Sprintf("%s:%d", best.file, best.line)
	}
	return best.file
}
