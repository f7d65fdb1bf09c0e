package calibrate

import (
	"fmt"
	"math"
	"strings"
	"time"
)

// The phases of fit, one source of the window each, in the order fit
// runs them: a later phase reads what an earlier one set on the Result
// (the service time's scale for the workers, the retry share for the
// budget).

// fitTraffic sets the intent rate, its series and whether it is steady,
// the attempts, the missing share and the retries per intent. It returns
// the attempts and the intents per step, which the errors and the retry
// policy are read against. Without the attempts, or with no intents,
// nothing can be fitted.
func (r *Result) fitTraffic(w *Window, src *Source, q func(Ref) string) (att, intents steps, err error) {
	win := w.Describe()
	step := w.Step.Seconds()
	if !w.Has(src.Attempts.Metric) {
		return att, intents, fail("no %s in the window (%s): it is how %s counts requests, and nothing can be fitted without it", src.Attempts.Metric, win, src.Name)
	}
	att = Counter(w, src.Attempts)
	if len(att.V) < 2 {
		return att, intents, fail("%s has %d step(s) in the window: at least 2 are needed (a longer window, or a shorter step)", src.Attempts.Metric, len(att.V))
	}
	if n := att.Missing(); n > 0 {
		all := len(att.T) + n
		r.Missing = float64(n) / float64(all)
		r.Notes = append(r.Notes, fmt.Sprintf("%d of the window's %d steps (%.0f%%) are unknown: they, or the step before them, have no sample of %s (failed scrapes, or a gap in the saved answers); they are left out of every rate and fit, never taken as 0 nor as one step's increase", n, all, 100*r.Missing, src.Attempts.Metric))
	}
	intents, retries, retryQuery := retrySteps(w, src, att, q)
	if retryQuery == "" {
		r.Notes = append(r.Notes, fmt.Sprintf("%s shows no retries apart from first attempts: every attempt is taken for an intent", src.Name))
	}
	rates := make([]float64, len(intents.V))
	for i, v := range intents.V {
		rates[i] = v / step
		r.RateSeries = append(r.RateSeries, Sample{T: intents.T[i], V: rates[i]})
	}
	base := median(rates)
	switch {
	case !(base > 0):
		return att, intents, fail("the intent rate is 0 in the window (%s of %s): an empty window, or the wrong selector", q(src.Attempts), win)
	case base > maxRate:
		return att, intents, fail("the intent rate is %.0f per second: more than a scenario takes (%d); is the selector summing unrelated services?", base, maxRate)
	}
	share := bandShare(rates, base)
	poisson, z := poissonSteady(intents.V)
	r.Steady = share >= SteadyShare || poisson
	r.Rate = Value{V: base, Known: true, Note: fmt.Sprintf("intents/s, the median of %d steps of %s; %.0f%% of the steps within ±%.0f%% of it (from %.4g to %.4g)",
		len(rates), orQuery(retryQuery, q(src.Attempts), src.Intents, w), 100*share, 100*SteadyBand, quantile(rates, 0), quantile(rates, 1))}
	if poisson && share < SteadyShare {
		r.Rate.Note += fmt.Sprintf("; steady all the same: the intents per step vary as Poisson arrivals at a steady rate would (their index of dispersion is %.1f standard deviations from Poisson's, within %g)", z, PoissonZ)
	}
	r.SeriesNote = smooth(r, w.Step)
	r.Attempts = Value{V: att.total() / att.span(w.Step).Seconds(), Known: true, Note: "attempts/s, " + q(src.Attempts)}

	// Retries per intent, over the window.
	if share, ok := retryShare(w, src, att, intents, retries, retryQuery); ok {
		r.RetryShare = Value{V: share, Known: true,
			Note: fmt.Sprintf("retries per intent over the window: %s over the intents", retryQuery)}
	} else {
		r.RetryShare = Value{Note: fmt.Sprintf("%s does not show retries apart from first attempts", src.Name)}
	}
	return att, intents, nil
}

// fitService sets the service time, from the steps with an empty queue,
// where the latency is the service time alone: a latency histogram's fit,
// else the median of a mean gauge (a fixed service time). It refuses
// buckets too coarse for the capacity to be workers over their mean.
func (r *Result) fitService(w *Window, src *Source) error {
	win := w.Describe()
	keep, keepNote := emptyQueue(w, src)
	switch {
	case src.Latency.ok() && w.Has(src.Latency.Base+"_bucket"):
		b := Histogram(w, src.Latency, keep)
		if b.Count <= 0 && keep != nil {
			b, keepNote = Histogram(w, src.Latency, nil), "every step had a queue, so every step is counted: the fit includes queueing"
		}
		f, err := FitService(b)
		if err != nil {
			return fail("the service time from %s_bucket (%s): %v", src.Latency.Base, win, err)
		}
		r.Service, r.ServiceOK = f, true
		where := "at the origin"
		if !src.ServerSide {
			where = "at the client: it includes the network and is longer than the service time"
		}
		r.ServiceNte = fmt.Sprintf("from %s_bucket/_sum/_count, %s; %s; %s", src.Latency.Base, where, keepNote, f.Describe())
	case src.Mean.ok() && w.Has(src.Mean.Metric):
		if src.MeanWithoutQueue != "" {
			keep, keepNote = nil, "every step counted: "+src.MeanWithoutQueue
		}
		g := Gauge(w, src.Mean)
		var vs []float64
		for _, t := range g.T {
			if keep == nil || keep(t) {
				v, _ := g.at(t)
				vs = append(vs, v/float64(max(1, countAt(w, src.Mean, t))))
			}
		}
		m := median(vs)
		if !(m >= MinServiceTime) || m > 3600 {
			return fail("the mean response time from %s is %v s: not a service time (at least 1µs, at most an hour)", src.Mean.Metric, m)
		}
		r.Service = ServiceFit{Dist: "fixed", Mean: m, Median: m, Distance: math.NaN()}
		r.ServiceOK = true
		r.ServiceNte = fmt.Sprintf("the median of %s (an average over its last 1024 requests): %s; only a mean is exported, so the distribution is unknown and taken as fixed", src.Mean.Metric, keepNote)
	default:
		return fail("no latency histogram (%s_bucket) in the window (%s): the service time cannot be fitted", src.Latency.Base, win)
	}
	r.ServiceTime = r.Service.ServiceTime()
	if sc, ok := r.ServiceTime.Scale(); ok {
		r.Scale = sc.Seconds()
	} else {
		r.Scale = r.Service.Mean
	}
	svc := r.Scale
	// The buckets' own mean, which an empirical service time runs with
	// (each bucket's share at its middle), is the one the capacity is
	// workers over: buckets so coarse that it is far from the exact mean
	// would make the capacity up.
	if r.Service.Dist == "empirical" && (svc > CoarseBuckets*r.Service.Mean || svc < r.Service.Mean/CoarseBuckets) {
		return fail("the service time from %s_bucket (%s): the buckets' mean, %s (each bucket's share at its middle, as the written service_time runs), is more than %d times from the exact mean, %s (_sum over _count): the buckets are too coarse to describe the service time", src.Latency.Base, win, sec(svc), CoarseBuckets, sec(r.Service.Mean))
	}
	return nil
}

// fitCapacity sets the workers (the configured limit, else what was busy
// while requests queued, saturation, else a lower bound) and the capacity,
// workers over the service time's scale, and refuses a count or a
// capacity no scenario takes.
func (r *Result) fitCapacity(w *Window, src *Source, q func(Ref) string) error {
	if err := countsNotNegative(w, src); err != nil {
		return err
	}
	r.fitWorkers(w, src, r.Scale, q)
	switch {
	case r.Workers.V > MaxWorkers:
		return fail("the fit gives %.0f workers (%s): more than a scenario takes (%d); is the selector summing unrelated services, or the latency in another unit?", r.Workers.V, r.Workers.Note, MaxWorkers)
	case !(r.Workers.V >= 1):
		return fail("the fit gives %g workers (%s): fewer than one; a gauge of a fraction of a request is not a count (a broken exporter, or another metric under its name)", r.Workers.V, r.Workers.Note)
	case !(r.Capacity.V > 0 && r.Capacity.V <= maxCapacity):
		return fail("the fit gives a capacity of %g requests/s (%s): not one a scenario takes (more than 0, at most %g); is the latency in another unit?", r.Capacity.V, r.Capacity.Note, float64(maxCapacity))
	}
	return nil
}

// fitClients sets the client instances: the distinct values of the
// source's client labels, else 1 (a default, said so).
func (r *Result) fitClients(w *Window, src *Source, q func(Ref) string) {
	if !(src.Clients.ok() && w.Has(src.Clients.Metric)) {
		r.Clients = Value{V: 1, Note: fmt.Sprintf("%s does not show the client instances; default 1: give check --clients N", src.Name)}
		return
	}
	seen := map[string]bool{}
	for _, s := range w.Series[src.Clients.Metric] {
		if len(s.Samples) == 0 {
			continue
		}
		var key []string
		for _, l := range src.ClientLabels {
			key = append(key, string(s.Labels[l]))
		}
		seen[strings.Join(key, "\x00")] = true
	}
	var names []string
	for _, l := range src.ClientLabels {
		names = append(names, string(l))
	}
	r.Clients = Value{V: float64(len(seen)), Known: true, Note: fmt.Sprintf("distinct (%s) of %s", strings.Join(names, ", "), q(src.Clients))}
}

// fitErrors sets the background error share, the median of the steps'
// errors over their attempts (att), and the share of attempts that timed
// out.
func (r *Result) fitErrors(w *Window, src *Source, att steps, q func(Ref) string) {
	if src.Errors.ok() && w.Has(src.Errors.Metric) {
		e := Counter(w, src.Errors)
		var shares []float64
		for i, t := range att.T {
			if att.V[i] <= 0 {
				continue
			}
			v, _ := e.at(t)
			shares = append(shares, min(1, v/att.V[i]))
		}
		if len(shares) > 0 {
			r.ErrorRate = Value{V: roundTo(median(shares), 3), Known: true, Note: fmt.Sprintf("the median per step of %s over the attempts", q(src.Errors))}
		}
	}
	if r.ErrorRate.Note == "" {
		r.ErrorRate = Value{Note: fmt.Sprintf("%s shows no errors here; default 0", src.Name)}
	}
	if src.Timeouts.ok() && w.Has(src.Timeouts.Metric) && att.total() > 0 {
		r.TimedOut = Value{V: Counter(w, src.Timeouts).total() / att.total(), Known: true, Note: q(src.Timeouts) + " over the attempts"}
	}
}

// fitTimeout sets the timeout, which is in no product's metrics: a
// default of ten times the fitted p99 service time, at least 1s.
func (r *Result) fitTimeout() {
	p99 := r.Service.Quantile(0.99)
	if !(p99 > 0) {
		p99 = r.Scale
	}
	to := max(time.Second, (time.Duration(10 * p99 * float64(time.Second))).Round(100*time.Millisecond))
	r.Timeout = Value{V: to.Seconds(), Note: fmt.Sprintf("no metric shows the timeout; default: ten times the fitted p99 service time (%s), at least 1s", sec(p99))}
}

// fitPolicy sets the retry policy: the retries (the source's default,
// else the storm's 3, then what the attempts per call show), a budget
// (exported, or seen refusing retries: its ratio then the retries per
// intent seen) and a breaker (seen refusing).
func (r *Result) fitPolicy(w *Window, src *Source, att, intents steps, q func(Ref) string) {
	r.MaxRetries = Value{V: 3, Note: src.Policy + "; default 3 (the storm's)"}
	if src.DefaultRetries >= 0 {
		r.MaxRetries = Value{V: float64(src.DefaultRetries), Note: src.Policy + fmt.Sprintf("; default %d, %s", src.DefaultRetries, src.DefaultWhy)}
	}
	r.fitAttempts(w, src, att.total(), intents.total(), q)
	over := 0.0
	if src.RetryOverflow.ok() && w.Has(src.RetryOverflow.Metric) {
		over = Counter(w, src.RetryOverflow).total()
	}
	switch {
	case src.Budget.ok() && w.Has(src.Budget.Metric), over > 0:
		r.HasBudget = true
		why := q(src.Budget) + " is exported: a retry budget is in use"
		if !(src.Budget.ok() && w.Has(src.Budget.Metric)) {
			why = fmt.Sprintf("%s counted %.0f refused retries: a budget (or a limit on retries in flight) is in use", q(src.RetryOverflow), over)
		}
		if over > 0 && r.RetryShare.Known && r.RetryShare.V > 0 {
			r.Budget = Value{V: roundTo(r.RetryShare.V, 2), Known: true, Note: why + fmt.Sprintf("; it refused %.0f retries, so it bound: its ratio is taken as the retries per intent seen, %.3g", over, r.RetryShare.V)}
		} else {
			r.Budget = Value{V: 0.1, Note: why + "; its ratio is not exported and it refused nothing here: default 0.1"}
		}
	default:
		r.Budget = Value{Note: fmt.Sprintf("no sign of a retry budget in %s's metrics", src.Name)}
	}
	if src.BreakerRefusals.ok() && w.Has(src.BreakerRefusals.Metric) {
		if n := Counter(w, src.BreakerRefusals).total(); n > 0 {
			r.Breaker = true
			r.BreakerNte = fmt.Sprintf("%s counted %.0f refusals: a breaker is in use; its settings are not exported: default consecutive, threshold 5, cooldown 5s", q(src.BreakerRefusals), n)
		} else {
			r.BreakerNte = fmt.Sprintf("%s counted no refusal: no breaker is assumed (one that never opened looks the same)", q(src.BreakerRefusals))
		}
	} else {
		r.BreakerNte = fmt.Sprintf("%s shows no breaker; none assumed", src.Name)
	}
}
