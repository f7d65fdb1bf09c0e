package sim

import (
	"errors"
	"fmt"
	"math"
	"strings"
)

// The accounting identities of a result. Every result the simulator returns
// satisfies them (Run checks, and fails with ErrIdentity rather than return
// numbers that do not add up); the lab checks its tallies with the same
// code, and the tests and FuzzRun check every result they make.
// docs/glossary.md lists them in words.
//
// The counting window: a summary counts the attempts sent during the run
// (its series' sums) and the intents that began during it, each followed to
// its end after the run if need be. What an attempt caused is counted with
// it: the wasted work and the drops of attempts sent during the run, the
// successes of attempts sent during it. A tier's call begun after the run
// is followed (a fleet's intent may wait on it) but counted nowhere.
//
// Per layer (the fleet's own summary is its first layer's), for a summary
// s and its series:
//
//	series-sums             s.attempts = Σ offered, and so for intents, retries, hedges,
//	                        successes, goodput, failed_attempts, breaker_refusals,
//	                        throttle_refusals and failures
//	attempt-kinds           offered = first_attempts + retries + hedges, every tick
//	failure-parts           failures = failed_attempts + breaker_refusals + throttle_refusals,
//	                        every tick and in total
//	goodput-is-success      goodput ≤ successes, every tick
//	one-outcome-per-attempt goodput + failed_attempts ≤ offered, every tick: an attempt is
//	                        answered in time, fails, or is left (cancelled, or unfinished)
//	successes-are-attempts  successes ≤ offered, every tick
//	timeouts-are-failures   timeouts ≤ failed_attempts
//	first-per-intent        first_attempts ≤ intents
//	lost-by-reason          intents_lost = Σ lost_by
//	won-or-lost             goodput + intents_lost ≤ intents: an intent succeeds once, or is lost
//	victims-arrived-after   victims ≤ intents from the tick the triggers ended in
//	after-clear             failures_after_clear = Σ failures of the ticks after the triggers
//	thrown-were-refused     answers_thrown_away ≤ breaker_refusals + throttle_refusals
//	waste-was-not-goodput   wasted_work + dropped ≤ attempts − goodput: work for nobody and
//	                        requests skipped are attempts whose caller did not get them
//	budget-losses-denied    lost_by.budget ≤ budget_denials
//	retries-per-request     retries_per_request = retries / intents
//	peak-offered            peak_offered = max offered
//	recovery-ticks          recovered ⇔ recovery_ticks is set, and then it is ≥ 0
//
// Through a chain (a fleet's tiers, outermost first, then the origin):
//
//	first-layer-is-fleet    the first layer's summary is the fleet's summary
//	calls-per-request       intents[l+1] ≤ attempts[l]: a tier makes at most one call for each
//	                        attempt it receives
//	amplification           amplification[l] = (attempts[l] + inbound retries[l]) / the fleet's intents
//
// Per replica, for the fleet and for each layer of a chain that has them
// (the first layer's are the fleet's):
//
//	replicas-are-attempts   attempts = Σ replicas' attempts + no_healthy_replica
//	replica-outcomes        a replica's successes + failures + cancelled ≤ its attempts
//	replica-successes       goodput = Σ replicas' successes: a success reached its client
//	replica-failures        Σ replicas' failures ≤ failed_attempts ≤ Σ replicas' failures +
//	                        no_healthy_replica
//	ejected-within-run      0 ≤ ejected_seconds ≤ the run's ticks × tick_seconds
//	replica-series          a replica's series sum to its attempts, successes and
//	                        failures; its ejected ticks × tick_seconds = ejected_seconds
var ErrIdentity = errors.New("sim: the result breaks an accounting identity (a bug: please report it)")

// IdentityError lists the identities a result breaks, each with its name
// and numbers. It matches ErrIdentity with errors.Is.
type IdentityError struct {
	Scenario string
	Broken   []string // "fleet/layer: identity: numbers"
}

func (e *IdentityError) Error() string {
	const most = 8
	b := e.Broken
	more := ""
	if len(b) > most {
		b, more = b[:most], fmt.Sprintf("\n\t... and %d more", len(e.Broken)-most)
	}
	return fmt.Sprintf("%v: scenario %q:\n\t%s%s", ErrIdentity, e.Scenario, strings.Join(b, "\n\t"), more)
}

func (e *IdentityError) Is(target error) bool { return target == ErrIdentity }

// Check verifies every accounting identity of r (listed above) and returns
// an *IdentityError naming each one broken, or nil.
func (r *Result) Check() error { return r.check(0) }

// MeasuredSlack is how far, as a share of a layer's intents (and at least
// 2), a result measured over real sockets may pass the two identities
// that compare what two processes saw, each by its own clock: won-or-lost
// (the gateway saw an attempt succeed in time; the client, a few
// microseconds later, had given up) and waste-was-not-goodput (the origin
// saw the client gone; the gateway had its answer). Every other identity
// holds exactly in the lab too.
const MeasuredSlack = 0.01

// CheckMeasured is Check for a result measured over real sockets (the
// lab's): the identities that compare two processes' clocks hold within
// MeasuredSlack, every other exactly.
func (r *Result) CheckMeasured() error { return r.check(MeasuredSlack) }

func (r *Result) check(slack float64) error {
	c := identityCheck{end: r.clearTick(), clearFrom: r.clearFromTick(), slack: slack}
	for i := range r.Fleets {
		f := &r.Fleets[i]
		c.layer(f.Name, &f.Summary, &f.Series)
		if len(f.Replicas) > 0 {
			c.replicas(f, len(f.Series.Tick), r.TickSeconds)
		}
		if len(f.Tiers) == 0 {
			continue
		}
		if !sameCounts(&f.Tiers[0].Summary, &f.Summary) {
			c.fail(f.Name, "first-layer-is-fleet", "the first layer's summary differs from the fleet's")
		}
		for l := range f.Tiers {
			t := &f.Tiers[l]
			name := f.Name + "/" + t.Name
			if l > 0 && len(t.Replicas) > 0 {
				c.replicas(&FleetResult{Name: name, Summary: t.Summary, Replicas: t.Replicas, NoHealthyReplica: t.NoHealthyReplica}, len(f.Series.Tick), r.TickSeconds)
			}
			if l > 0 {
				c.layer(name, &t.Summary, &t.Series)
				if above := &f.Tiers[l-1].Summary; t.Summary.Intents > above.Attempts {
					c.fail(name, "calls-per-request", "%d calls into it > %d attempts into %s", t.Summary.Intents, above.Attempts, f.Tiers[l-1].Name)
				}
			}
			if want := ratio(t.Summary.Attempts+t.Summary.InboundRetries, f.Summary.Intents); !closeTo(t.Amplification, want) {
				c.fail(name, "amplification", "%v != (%d attempts + %d inbound retries) / %d intents", t.Amplification, t.Summary.Attempts, t.Summary.InboundRetries, f.Summary.Intents)
			}
		}
		c.components(f.Name+"/", f.Tiers) // caches and pools (sysidentities.go)
	}
	if len(r.Layers) > 0 {
		c.shared(r)
	}
	if len(c.broken) == 0 {
		return nil
	}
	return &IdentityError{Scenario: r.Scenario, Broken: c.broken}
}

// clearTick is the first tick wholly after the triggers (TriggerTicks'
// end), 0 without triggers.
func (r *Result) clearTick() int {
	if r.Trigger == nil || r.TickSeconds <= 0 {
		return 0
	}
	return int(math.Ceil(r.Trigger.End/r.TickSeconds - 1e-9))
}

// clearFromTick is the tick the triggers ended in: intents after the end
// arrive in it or later.
func (r *Result) clearFromTick() int {
	if r.Trigger == nil || r.TickSeconds <= 0 {
		return 0
	}
	return int(math.Floor(r.Trigger.End/r.TickSeconds + 1e-9))
}

type identityCheck struct {
	end, clearFrom int
	slack          float64 // a share of the intents, for the two clocks' identities
	broken         []string
}

func (c *identityCheck) fail(who, identity, format string, args ...any) {
	c.broken = append(c.broken, who+": "+identity+": "+fmt.Sprintf(format, args...))
}

// layer checks the identities of one layer's summary s and series se.
func (c *identityCheck) layer(who string, s *Summary, se *Series) {
	n := len(se.Tick)
	for _, a := range []struct {
		name string
		v    []int64
	}{
		{"intents", se.Intents}, {"offered", se.Offered}, {"first_attempts", se.FirstAttempts},
		{"retries", se.Retries}, {"hedges", se.Hedges}, {"successes", se.Successes},
		{"goodput", se.Goodput}, {"failures", se.Failures}, {"failed_attempts", se.FailedAttempts},
		{"breaker_refusals", se.BreakerRefusals},
	} {
		if len(a.v) != n {
			c.fail(who, "series-sums", "series %s has %d ticks, not %d", a.name, len(a.v), n)
			return
		}
	}
	if se.ThrottleRefusals != nil && len(se.ThrottleRefusals) != n {
		c.fail(who, "series-sums", "series throttle_refusals has %d ticks, not %d", len(se.ThrottleRefusals), n)
		return
	}
	var sums Summary
	var peak, afterClear, lateIntents int64
	for k := range n {
		thr := throttled(se, k)
		sums.Intents += se.Intents[k]
		sums.Attempts += se.Offered[k]
		sums.Retries += se.Retries[k]
		sums.Hedges += se.Hedges[k]
		sums.Successes += se.Successes[k]
		sums.Goodput += se.Goodput[k]
		sums.Failures += se.Failures[k]
		sums.FailedAttempts += se.FailedAttempts[k]
		sums.BreakerRefusals += se.BreakerRefusals[k]
		sums.ThrottleRefusals += thr
		peak = max(peak, se.Offered[k])
		if k >= c.end {
			afterClear += se.Failures[k]
		}
		if k >= c.clearFrom {
			lateIntents += se.Intents[k]
		}
		if se.Offered[k] != se.FirstAttempts[k]+se.Retries[k]+se.Hedges[k] {
			c.fail(who, "attempt-kinds", "tick %d: offered %d != first %d + retries %d + hedges %d", k, se.Offered[k], se.FirstAttempts[k], se.Retries[k], se.Hedges[k])
		}
		if se.Failures[k] != se.FailedAttempts[k]+se.BreakerRefusals[k]+thr {
			c.fail(who, "failure-parts", "tick %d: failures %d != failed %d + breaker %d + throttle %d", k, se.Failures[k], se.FailedAttempts[k], se.BreakerRefusals[k], thr)
		}
		if se.Goodput[k] > se.Successes[k] {
			c.fail(who, "goodput-is-success", "tick %d: goodput %d > successes %d", k, se.Goodput[k], se.Successes[k])
		}
		if se.Goodput[k]+se.FailedAttempts[k] > se.Offered[k] {
			c.fail(who, "one-outcome-per-attempt", "tick %d: goodput %d + failed %d > offered %d", k, se.Goodput[k], se.FailedAttempts[k], se.Offered[k])
		}
		if se.Successes[k] > se.Offered[k] {
			c.fail(who, "successes-are-attempts", "tick %d: successes %d > offered %d", k, se.Successes[k], se.Offered[k])
		}
	}
	for _, p := range []struct {
		name      string
		got, want int64
	}{
		{"intents", s.Intents, sums.Intents}, {"attempts", s.Attempts, sums.Attempts},
		{"retries", s.Retries, sums.Retries}, {"hedges", s.Hedges, sums.Hedges},
		{"successes", s.Successes, sums.Successes}, {"goodput", s.Goodput, sums.Goodput},
		{"failures", s.Failures, sums.Failures}, {"failed_attempts", s.FailedAttempts, sums.FailedAttempts},
		{"breaker_refusals", s.BreakerRefusals, sums.BreakerRefusals},
		{"throttle_refusals", s.ThrottleRefusals, sums.ThrottleRefusals},
	} {
		if p.got != p.want {
			c.fail(who, "series-sums", "%s %d != %d, the sum of its series", p.name, p.got, p.want)
		}
	}
	if s.Failures != s.FailedAttempts+s.BreakerRefusals+s.ThrottleRefusals {
		c.fail(who, "failure-parts", "failures %d != failed %d + breaker %d + throttle %d", s.Failures, s.FailedAttempts, s.BreakerRefusals, s.ThrottleRefusals)
	}
	le := func(identity, a string, x int64, b string, y int64) {
		if x > y {
			c.fail(who, identity, "%s %d > %s %d", a, x, b, y)
		}
	}
	le("timeouts-are-failures", "timeouts", s.Timeouts, "failed_attempts", s.FailedAttempts)
	le("first-per-intent", "first_attempts", sumOf(se.FirstAttempts), "intents", s.Intents)
	l := s.LostBy
	if by := l.RetriesExhausted + l.Budget + l.Breaker + l.Throttled + l.NotIdempotent + l.Deadline + l.Unfinished; by != s.IntentsLost {
		c.fail(who, "lost-by-reason", "intents_lost %d != %d, the sum of lost_by %+v", s.IntentsLost, by, l)
	}
	var skew int64 // what two processes' clocks may disagree on
	if c.slack > 0 {
		skew = max(2, int64(math.Ceil(c.slack*float64(s.Intents))))
	}
	le("won-or-lost", "goodput + intents_lost", s.Goodput+s.IntentsLost, "intents", s.Intents+skew)
	le("victims-arrived-after", "victims", s.Victims, "intents from the tick the triggers ended", lateIntents)
	if s.FailuresAfterClear != afterClear {
		c.fail(who, "after-clear", "failures_after_clear %d != %d, the failures of ticks %d on", s.FailuresAfterClear, afterClear, c.end)
	}
	le("thrown-were-refused", "answers_thrown_away", s.AnswersThrownAway, "refusals", s.BreakerRefusals+s.ThrottleRefusals)
	le("waste-was-not-goodput", "wasted_work + dropped", s.WastedWork+s.Dropped, "attempts − goodput", s.Attempts-s.Goodput+skew)
	le("budget-losses-denied", "lost_by.budget", l.Budget, "budget_denials", s.BudgetDenials)
	if want := ratio(s.Retries, s.Intents); !closeTo(s.RetriesPerRequest, want) {
		c.fail(who, "retries-per-request", "%v != %d retries / %d intents", s.RetriesPerRequest, s.Retries, s.Intents)
	}
	if s.PeakOffered != peak {
		c.fail(who, "peak-offered", "peak_offered %d != %d, the most offered in a tick", s.PeakOffered, peak)
	}
	if s.Recovered != (s.RecoveryTicks != nil) || (s.RecoveryTicks != nil && *s.RecoveryTicks < 0) {
		c.fail(who, "recovery-ticks", "recovered %v with recovery_ticks %v", s.Recovered, s.RecoveryTicks)
	}
	for _, v := range []struct {
		name string
		n    int64
	}{
		{"intents", s.Intents}, {"attempts", s.Attempts}, {"timeouts", s.Timeouts}, {"victims", s.Victims},
		{"intents_lost", s.IntentsLost}, {"wasted_work", s.WastedWork}, {"dropped", s.Dropped},
		{"budget_denials", s.BudgetDenials}, {"answers_thrown_away", s.AnswersThrownAway}, {"breaker_trips", s.BreakerTrips},
	} {
		if v.n < 0 {
			c.fail(who, "non-negative", "%s %d", v.name, v.n)
		}
	}
}

func sumOf(v []int64) int64 {
	var n int64
	for _, x := range v {
		n += x
	}
	return n
}

// sameCounts reports whether two summaries hold the same counts.
func sameCounts(a, b *Summary) bool {
	return a.Intents == b.Intents && a.Attempts == b.Attempts && a.Retries == b.Retries &&
		a.Successes == b.Successes && a.Failures == b.Failures && a.IntentsLost == b.IntentsLost &&
		a.WastedWork == b.WastedWork && a.Victims == b.Victims
}

func closeTo(a, b float64) bool {
	return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b))
}

// replicas checks the per-replica identities of fleet f, whose run lasted
// ticks ticks of tick seconds.
func (c *identityCheck) replicas(f *FleetResult, ticks int, tick float64) {
	run := float64(ticks) * tick
	var att, succ, fail int64
	for _, r := range f.Replicas {
		att, succ, fail = att+r.Attempts, succ+r.Successes, fail+r.Failures
		who := fmt.Sprintf("%s/replica %d", f.Name, r.Replica)
		if r.Successes+r.Failures+r.Cancelled > r.Attempts {
			c.fail(who, "replica-outcomes", "%d successes + %d failures + %d cancelled > %d attempts", r.Successes, r.Failures, r.Cancelled, r.Attempts)
		}
		if r.EjectedSeconds < 0 || r.EjectedSeconds > run+1e-9 {
			c.fail(who, "ejected-within-run", "%v s ejected in a %v s run", r.EjectedSeconds, run)
		}
		if rs := r.Series; rs != nil {
			ej := 0
			for _, e := range rs.Ejected {
				if e {
					ej++
				}
			}
			if len(rs.Attempts) != ticks || sumOf(rs.Attempts) != r.Attempts || sumOf(rs.Successes) != r.Successes || sumOf(rs.Failures) != r.Failures ||
				!closeTo(float64(ej)*tick, r.EjectedSeconds) {
				c.fail(who, "replica-series", "%d ticks: Σ %d attempts, %d successes, %d failures, %d ejected ticks; totals %d, %d, %d, %v s",
					len(rs.Attempts), sumOf(rs.Attempts), sumOf(rs.Successes), sumOf(rs.Failures), ej, r.Attempts, r.Successes, r.Failures, r.EjectedSeconds)
			}
		}
	}
	s := &f.Summary
	if att+f.NoHealthyReplica != s.Attempts {
		c.fail(f.Name, "replicas-are-attempts", "%d at the replicas + %d with none != %d attempts", att, f.NoHealthyReplica, s.Attempts)
	}
	if succ != s.Goodput {
		c.fail(f.Name, "replica-successes", "%d successes at the replicas != %d goodput", succ, s.Goodput)
	}
	if fail > s.FailedAttempts || s.FailedAttempts > fail+f.NoHealthyReplica {
		c.fail(f.Name, "replica-failures", "%d failed attempts, %d failures at the replicas, %d with none", s.FailedAttempts, fail, f.NoHealthyReplica)
	}
}
