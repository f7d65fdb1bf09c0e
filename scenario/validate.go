package scenario

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/retrystorm/retrystorm/resil"
	"github.com/retrystorm/retrystorm/resil/admission"
)

// Bounds that the design leaves open. They keep a typo ("120h" for "120s",
// a rate of 1e12) from starting a run that never ends, and keep every sum
// of virtual times far from overflow.
const (
	maxTicks    = 100_000
	maxRun      = 30 * 24 * time.Hour // a run's duration
	maxWait     = 24 * time.Hour      // a timeout, a latency, a cooldown
	maxRate     = 1e6                 // intents per second
	maxCapacity = 1e9                 // attempts per second
	maxCount    = 1_000_000           // clients, workers, retries, thresholds
	maxReplicas = 10_000
	maxNameLen  = MaxNameBytes
)

// MaxNameBytes is the longest name a scenario or a fleet may have, in
// bytes.
const MaxNameBytes = 100

// Validate checks a scenario as Parse leaves it, defaults filled in: every
// value in range, nothing set that its kind does not use, and the rules
// that tie fields together (a tick that divides the duration, triggers
// within the run). A scenario built or changed in code should pass it
// before it runs; there an empty breaker or backoff use reads as none, but
// every other word must be spelled out. The error is an [*Error] whose
// Field is the path the file would use; it has no line.
func (s *Scenario) Validate() error {
	if e := s.validate(nil); e != nil {
		return e
	}
	return nil
}

// validate checks s; shown holds, by field path, how the file wrote the
// values Parse had to saturate (a number beyond what its field can hold),
// so that the range error quotes the file.
func (s *Scenario) validate(shown map[string]string) *Error {
	c := &checker{shown: shown}
	scenarioObject(s).validate(c, "")
	if c.ok() {
		s.crossCheck(c)
	}
	if c.ok() {
		// Every fleet must build: the resil constructors are the last word
		// on a policy's settings. The checks above should already have said
		// why one cannot; this catches them falling out of step.
		for i := range s.Fleets {
			if _, err := s.Fleets[i].NewPolicy(); err != nil {
				c.fail(fmt.Sprintf("fleets[%d]", i), "%v", err)
			}
			s.checkReplicaPolicy(c, i)
		}
		if _, err := s.Origin.NewLimiter(); err != nil {
			c.fail("origin.limit", "%v", err)
		}
		for i := range s.Tiers {
			if _, err := s.Tiers[i].NewPolicy(); err != nil {
				c.fail(fmt.Sprintf("tiers[%d].client", i), "%v", err)
			}
			s.checkTierPicker(c, i)
		}
	}
	return c.err
}

// checker keeps the first failed rule.
type checker struct {
	err   *Error
	shown map[string]string
}

// show writes the value of field as the file did, if Parse saturated it,
// or else v in the file's notation.
func (c *checker) show(field string, v any) string {
	if t, ok := c.shown[field]; ok {
		return t
	}
	return show(v)
}

func (c *checker) ok() bool { return c.err == nil }

func (c *checker) fail(field, format string, args ...any) {
	if c.err == nil {
		c.err = &Error{Field: field, Msg: fmt.Sprintf(format, args...)}
	}
}

type ordered interface {
	~int | ~float64 | ~int64
}

// in checks lo <= v <= hi; over checks lo < v <= hi. Written so that NaN
// fails both.
func in[T ordered](c *checker, field string, v, lo, hi T) {
	if !(v >= lo && v <= hi) {
		c.fail(field, "must be in [%s, %s], got %s", show(lo), show(hi), c.show(field, v))
	}
}

func over[T ordered](c *checker, field string, v, lo, hi T) {
	if !(v > lo && v <= hi) {
		c.fail(field, "must be in (%s, %s], got %s", show(lo), show(hi), c.show(field, v))
	}
}

// show writes a bound or a value in the file's own notation.
func show(v any) string {
	switch v := v.(type) {
	case time.Duration:
		return formatDuration(v)
	case float64:
		if v == math.Trunc(v) && math.Abs(v) < 1e15 {
			return strconv.FormatFloat(v, 'f', -1, 64)
		}
		return formatFloat(v)
	}
	return fmt.Sprint(v)
}

// name checks a scenario or fleet name: it labels tables and plots.
func name(c *checker, field, s string) {
	switch {
	case s == "":
		c.fail(field, "must not be empty")
	case len(s) > maxNameLen:
		c.fail(field, "is %d bytes long; at most %d", len(s), maxNameLen)
	case !utf8.ValidString(s):
		c.fail(field, "is not valid UTF-8")
	case slices.ContainsFunc([]rune(s), unicode.IsControl):
		c.fail(field, "must not hold control characters (a newline, a tab)")
	default:
		if i := slices.IndexFunc([]rune(s), invisible); i >= 0 {
			c.fail(field, "must not hold invisible or direction-changing characters (%U): they make a name look like another, and break the tables' alignment", []rune(s)[i])
		}
	}
}

// invisible reports whether r is a character a name must not hold
// although it is not a control character: format characters (Unicode
// category Cf: zero-width spaces and joiners, bidirectional overrides and
// isolates, the byte order mark), line and paragraph separators, private
// use, unassigned code points, and the other default-ignorable ones
// (Hangul fillers), all of which print as nothing or as something they are
// not.
func invisible(r rune) bool {
	return !unicode.IsGraphic(r) || unicode.Is(unicode.Other_Default_Ignorable_Code_Point, r)
}

func (s *Scenario) check(c *checker, path string) {
	name(c, "name", s.Name)
	over(c, "duration", s.Duration, 0, maxRun)
	if !c.ok() {
		return
	}
	switch {
	case s.Tick <= 0:
		c.fail("tick", "must be more than 0, got %s", show(s.Tick))
	case s.Tick > s.Duration:
		c.fail("tick", "%s is longer than the duration (%s)", show(s.Tick), show(s.Duration))
	case s.Duration%s.Tick != 0:
		c.fail("duration", "%s is not a whole number of ticks of %s", show(s.Duration), show(s.Tick))
	case s.Duration/s.Tick > maxTicks:
		c.fail("tick", "%s makes %d ticks of the %s run; at most %d: use a longer tick", show(s.Tick), s.Duration/s.Tick, show(s.Duration), maxTicks)
	}
}

// crossCheck holds the rules between sections.
func (s *Scenario) crossCheck(c *checker) {
	if len(s.Fleets) == 0 {
		c.fail("fleets", "at least one fleet is required")
	}
	for i, f := range s.Fleets {
		if j := slices.IndexFunc(s.Fleets[:i], func(g Fleet) bool { return g.Name == f.Name }); j >= 0 {
			c.fail(fmt.Sprintf("fleets[%d].name", i), "%q is the name of fleets[%d] too: fleet names must differ", f.Name, j)
		}
	}
	if o := &s.Origin; o.DropExpired && o.Shed.Deadline {
		c.fail("origin.drop_expired", "and shed: {deadline: true} both drop expired requests: keep one (shed refuses on arrival too, and answers a refusal at once)")
	}
	if sr := s.Traffic.Series; sr != nil {
		last := sr.Points[len(sr.Points)-1].At
		switch {
		case s.Traffic.Rate != sr.Peak():
			c.fail("traffic.rate", "is %s, but with a series the rate is the series' peak, %s (Parse sets it)", show(s.Traffic.Rate), show(sr.Peak()))
		case last < s.Duration-s.Tick:
			c.fail("traffic.series.file", "the series covers %s, but the run's last tick starts at %s: give rows up to it, or shorten the duration", show(last), show(s.Duration-s.Tick))
		}
	}
	if len(s.Tiers) > MaxTiers {
		c.fail(fmt.Sprintf("tiers[%d]", MaxTiers), "%d tiers; at most %d", len(s.Tiers), MaxTiers)
	}
	for i, t := range s.Tiers {
		if j := slices.IndexFunc(s.Tiers[:i], func(u Tier) bool { return u.Name == t.Name }); j >= 0 {
			c.fail(fmt.Sprintf("tiers[%d].name", i), "%q is the name of tiers[%d] too: tier names must differ", t.Name, j)
		} else if t.Name == "origin" {
			c.fail(fmt.Sprintf("tiers[%d].name", i), "origin is the name the results give the origin: call the tier something else")
		}
	}
	for i, t := range s.Triggers {
		p := fmt.Sprintf("triggers[%d]", i)
		switch {
		case t.At >= s.Duration:
			c.fail(p+".at", "%s is not within the %s run", show(t.At), show(s.Duration))
		case t.For > s.Duration-t.At:
			c.fail(p+".for", "the trigger ends at %s, after the end of the %s run", show(t.At+t.For), show(s.Duration))
		case t.Kind == TriggerCapacity && s.Origin.Model == ModelConcurrency:
			c.fail(p+".kind", "a capacity trigger needs an origin with a capacity; the concurrency model has none (try a latency trigger)")
		case t.Replicas > s.Origin.Replicas:
			c.fail(p+".replicas", "%d replicas, but the origin has %d", t.Replicas, s.Origin.Replicas)
		case t.Replica != nil && t.Replicas != 0:
			c.fail(p+".replica", "and replicas exclude each other: give one")
		case t.Replica != nil && (*t.Replica < 0 || *t.Replica >= s.Origin.Replicas):
			c.fail(p+".replica", "replica %d, but the origin has %d (numbered from 0)", *t.Replica, s.Origin.Replicas)
		case t.Replica != nil && t.Kind == TriggerOutage && t.Mode == OutageStall:
			c.fail(p+".mode", "a stall of one replica is not simulated: use blackhole or refuse, or leave out replica")
		}
	}
	s.checkSystem(c)
}

func (t *Traffic) check(c *checker, path string) { t.checkRate(c, path, false) }

// checkRate is check, but that a fleet's own traffic may have a rate of 0
// (zeroOK): a population that only a burst or a load trigger sets going.
func (t *Traffic) checkRate(c *checker, path string, zeroOK bool) {
	switch {
	case t.Series != nil || t.Closed():
	case zeroOK:
		in(c, join(path, "rate"), t.Rate, 0, maxRate)
	default:
		over(c, join(path, "rate"), t.Rate, 0, maxRate)
	}
	t.checkArrivals(c, path)
	in(c, join(path, "clients"), t.Clients, 1, maxCount)
	in(c, join(path, "idempotent"), t.Idempotent, 0, 1)
	in(c, join(path, "keys"), t.Keys, 0, 1)
}

func (o *Origin) check(c *checker, path string) {
	at := func(key string) string { return join(path, key) }
	switch o.Model {
	case ModelCapacity:
		over(c, at("capacity"), o.Capacity, 0, maxCapacity)
		in(c, at("rejection_cost"), o.RejectionCost, 0, 1)
		over(c, at("latency"), o.Latency, 0, maxWait)
	case ModelQueue:
		over(c, at("capacity"), o.Capacity, 0, maxCapacity)
		in(c, at("workers"), o.Workers, 1, maxCount)
		in(c, at("queue_limit"), o.QueueLimit, 0, 1e9)
		in(c, at("max_queue_time"), o.MaxQueueTime, 0, maxWait)
		o.checkWaitQueue(c, at)
	case ModelConcurrency:
		over(c, at("base"), o.Base, 0, maxWait)
		in(c, at("per_inflight"), o.PerInflight, 0, time.Hour)
	}
	if !o.holds() && (o.Limit != (Limit{}) || o.Shed != (Shed{})) {
		// As the parser refuses the keys: what the file cannot say, the
		// writer cannot write.
		c.fail(at("limit"), "the %s model holds no requests: limit and shed apply to the queue and concurrency models", o.Model)
	}
	in(c, at("error_rate"), o.ErrorRate, 0, 1)
	in(c, at("broken"), o.Broken, 0, 1)
	in(c, at("replicas"), o.Replicas, 1, maxReplicas)
	if c.ok() {
		o.checkFaults(c, at("replicas"))
		// The fields are checked after this map's own rules.
		serviceTime{&o.ServiceTime}.validate(c, at("service_time"))
		o.checkServiceTime(c, path)
	}
	if c.ok() && o.Model == ModelQueue && o.Workers%o.Replicas != 0 {
		if o.Workers < o.Replicas {
			c.fail(at("workers"), "%d workers for %d replicas: each replica needs at least one", o.Workers, o.Replicas)
		} else {
			c.fail(at("workers"), "%d workers cannot be shared equally by %d replicas: make workers a multiple of replicas", o.Workers, o.Replicas)
		}
	}
}

// checkWaitQueue holds the rules of a queue that times its waiters: resil's
// wait queue (adaptive_lifo, max_queue_time) is bounded and takes its
// room up front, and adaptive LIFO tells overload by how long the queue
// has not been empty.
func (o *Origin) checkWaitQueue(c *checker, at func(string) string) {
	adaptive := o.Discipline == resilWord(admission.AdaptiveLIFO)
	if !c.ok() || (!adaptive && o.MaxQueueTime == 0) {
		return
	}
	why := "max_queue_time"
	if adaptive {
		why = "discipline: " + o.Discipline
	}
	switch {
	case adaptive && o.MaxQueueTime == 0:
		c.fail(at("max_queue_time"), "is required by discipline: %s: it is how long the queue may stay non-empty before it counts as overloaded and serves the newest first (Facebook uses 100ms)", o.Discipline)
	case o.MaxQueueTime < time.Microsecond:
		c.fail(at("max_queue_time"), "must be 0s (no limit) or at least 1us, got %s", show(o.MaxQueueTime))
	case o.QueueLimit == 0:
		c.fail(at("queue_limit"), "%s needs a bounded queue: set queue_limit (at most %d per replica)", why, maxWaitQueue)
	case (o.QueueLimit+o.Replicas-1)/o.Replicas > maxWaitQueue:
		c.fail(at("queue_limit"), "%s holds at most %d requests per replica, got %d for %d replicas", why, maxWaitQueue, o.QueueLimit, o.Replicas)
	}
}

// maxWaitQueue is the longest queue resil's wait queue holds.
const maxWaitQueue = 1_000_000

// holds reports whether the origin's model holds requests (queue and
// concurrency), so that a limit or shedding applies.
func (o *Origin) holds() bool { return o.Model == ModelQueue || o.Model == ModelConcurrency }

func (l *Limit) check(c *checker, path string) {
	at := func(key string) string { return join(path, "settings."+key) }
	switch l.Use {
	case LimitNone, "":
		return
	case LimitFixed:
		in(c, at("limit"), l.Limit, 1, maxCount)
		return
	}
	in(c, at("min_limit"), l.MinLimit, 1, maxCount)
	in(c, at("max_limit"), l.MaxLimit, l.MinLimit, maxCount)
	in(c, at("limit"), l.Limit, l.MinLimit, l.MaxLimit)
	switch l.Use {
	case LimitAIMD:
		if !(l.Backoff >= 0.1 && l.Backoff < 1) {
			c.fail(at("backoff"), "must be in [0.1, 1), got %s", c.show(at("backoff"), l.Backoff))
		}
		in(c, at("slow_rtt"), l.SlowRTT, 0, maxWait)
	case LimitGradient:
		over(c, at("smoothing"), l.Smoothing, 0, 1)
		in(c, at("tolerance"), l.Tolerance, 1, 100)
		over(c, at("headroom"), l.Headroom, 0, 1e6)
		in(c, at("window"), l.Window, time.Microsecond, time.Hour)
		in(c, at("window_samples"), l.WindowSamples, 1, maxCount)
		in(c, at("long_window"), l.LongWindow, 1, maxCount)
	case LimitVegas:
		over(c, at("smoothing"), l.Smoothing, 0, 1)
		in(c, at("probe"), l.Probe, 0, maxCount)
	}
}

func (s *Shed) check(c *checker, path string) {
	at := func(key string) string { return join(path, key) }
	in(c, at("service_time"), s.ServiceTime, 0, maxWait)
	in(c, at("reserve"), s.Reserve, 0, time.Hour)
	if c.ok() && !s.Deadline && (s.ServiceTime != 0 || s.Reserve != 0) {
		key := "service_time"
		if s.ServiceTime == 0 {
			key = "reserve"
		}
		c.fail(at(key), "does nothing without deadline: true")
	}
}

func (t *Trigger) check(c *checker, path string) {
	at := func(key string) string { return join(path, key) }
	in(c, at("at"), t.At, 0, maxRun)
	t.checkFor(c, path)
	t.checkNew(c, path)
	switch t.Kind {
	case TriggerCapacity:
		in(c, at("capacity"), t.Capacity, 0, maxCapacity)
	case TriggerErrors:
		over(c, at("error_rate"), t.ErrorRate, 0, 1)
		if t.Answer == AnswerRejection && t.Replica != nil {
			c.fail(at("answer"), "rejection applies to the whole origin: a replica's errors trigger answers errors")
		}
	case TriggerLoad:
		in(c, at("rate"), t.Rate, 0, maxRate)
	case TriggerLatency:
		in(c, at("factor"), t.Factor, 1, 1e6)
		in(c, at("replicas"), t.Replicas, 0, maxReplicas)
	}
}

func (f *Fleet) check(c *checker, path string) {
	name(c, join(path, "name"), f.Name)
	checkCall(c, path, f.Timeout, f.Deadline, f.Hedge)
}

func (t *Tier) check(c *checker, path string) {
	name(c, join(path, "name"), t.Name)
	if len(t.Server.Faults) > 0 {
		c.fail(join(path, "server.replicas.faults"), "faults apply to the origin's replicas only")
	}
}

func (cl *Client) check(c *checker, path string) {
	checkCall(c, path, cl.Timeout, cl.Deadline, cl.Hedge)
}

// checkCall checks what a fleet and a tier's client share: the timeout,
// the deadline and the hedge, which must go before the timeout.
func checkCall(c *checker, path string, timeout, deadline time.Duration, h Hedge) {
	at := func(key string) string { return join(path, key) }
	over(c, at("timeout"), timeout, 0, maxWait)
	in(c, at("deadline"), deadline, 0, maxWait)
	switch {
	case h.Delay < 0:
		c.fail(at("hedge.delay"), "must not be negative, got %s", show(h.Delay))
	case h.Delay >= timeout && h.Delay > 0:
		c.fail(at("hedge.delay"), "%s is not shorter than the timeout (%s): the hedge would go after the attempt gave up", show(h.Delay), show(timeout))
	case h.Delay == 0 && h.Max != 0:
		c.fail(at("hedge.max"), "needs a delay: hedging is off while delay is 0s")
	case h.Delay > 0:
		in(c, at("hedge.max"), h.Max, 1, 100)
	}
}

func (ib *Inbound) check(c *checker, path string) {
	in(c, join(path, "retries"), ib.Retries, 0, 10)
	if ib.Retries > 0 && ib.Product == "" {
		c.fail(join(path, "product"), "is required with retries: which proxy retries (envoy for Istio's sidecar)?")
	}
}

func (r *Retry) check(c *checker, path string) {
	if r.MaxRetries != -1 {
		in(c, join(path, "max_retries"), r.MaxRetries, 0, maxCount)
	}
}

func (b *Backoff) check(c *checker, path string) {
	at := func(key string) string { return join(path, key) }
	use := cmp.Or(b.Use, "none")
	in(c, at("base"), b.Base, 0, maxWait)
	in(c, at("cap"), b.Cap, 0, maxWait)
	if !c.ok() {
		return
	}
	// Decorrelated jitter makes its own delays from base and cap, whatever
	// the schedule; the other jitters spread the schedule's delay, which
	// use: none does not have.
	decorrelated := b.Jitter == "decorrelated"
	delays := use != "none" || decorrelated
	switch {
	case delays && b.Base == 0 && decorrelated:
		c.fail(at("base"), "is required by decorrelated jitter (it has no default)")
	case delays && b.Base == 0:
		c.fail(at("base"), "is required by use: %s (it has no default)", use)
	case !delays:
		// A base, a cap or a jitter that use: none would ignore: resil
		// refuses them (Backoff.Validate), and its reason is reported
		// here under the file's key, so that a file and a program are
		// refused in the same words.
		if _, err := b.resil(); err != nil {
			if se, ok := errors.AsType[*resil.SettingError](err); ok {
				if key, ok := strings.CutPrefix(se.Field, "Backoff."); ok && slices.Contains([]string{"Base", "Cap", "Jitter"}, key) {
					c.fail(at(strings.ToLower(key)), "%s", se.Reason)
				}
			}
		}
	case decorrelated && b.Cap == 0:
		c.fail(at("cap"), "is required by decorrelated jitter (it has no default)")
	case b.Cap != 0 && b.Cap < b.Base:
		c.fail(at("cap"), "%s is below base (%s): make it 0s for no cap, or at least base", show(b.Cap), show(b.Base))
	case use == "exponential":
		in(c, at("multiplier"), b.Multiplier, 1, 1000)
	}
	if b.Jitter == "factor" {
		over(c, at("factor"), b.Factor, 0, 1)
	} else if b.Factor != 0 {
		c.fail(at("factor"), "applies to factor jitter only")
	}
}

func (v word) validate(c *checker, path string) {
	if *v.p == "" && v.unset != "" {
		return
	}
	if !slices.Contains(v.words, *v.p) {
		c.fail(path, "must be %s, got %q", oneOf(v.words), *v.p)
	}
}
