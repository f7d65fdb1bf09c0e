package lab

import (
	"cmp"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/retrystorm/retrystorm/scenario"
)

// resil's defaults for the durations a scenario may leave zero: the loader
// writes them out, but a scenario built in Go may not, and resil would
// read a zero as its own default in unscaled time.
const (
	defaultCooldown       = 5 * time.Second
	defaultTTL            = 10 * time.Second
	defaultLimitWindow    = time.Second     // a gradient limit's window
	defaultThrottleWindow = 2 * time.Minute // the adaptive throttle's
)

// Scale returns a copy of sc that runs 1/f times as fast when f < 1:
// every duration is multiplied by f and every rate (per second) divided by
// f, so that what happens in one tick, counted per tick, stays the same.
// With f = 0.1 a scenario of 120 one-second ticks runs in 12 s of wall-clock
// time with ten times the requests per second. Counts (clients, workers,
// queue limits, token balances, retries) and shares (error rates, budget
// ratios) do not change. sc is not modified.
func Scale(sc *scenario.Scenario, f float64) *scenario.Scenario {
	d := func(x time.Duration) time.Duration { return time.Duration(float64(x) * f) }
	r := func(x float64) float64 { return x / f }
	s := *sc
	s.Duration, s.Tick = d(s.Duration), d(s.Tick)
	scaleTraffic(&s.Traffic, f)
	scaleOrigin(&s.Origin, f)
	s.Triggers = slices.Clone(sc.Triggers)
	for i := range s.Triggers {
		t := &s.Triggers[i]
		t.At, t.For = d(t.At), d(t.For)
		t.Capacity, t.Rate = r(t.Capacity), r(t.Rate)
	}
	s.Tiers = slices.Clone(sc.Tiers)
	for i := range s.Tiers {
		t := &s.Tiers[i]
		scaleOrigin(&t.Server, f)
		fl := t.Client.Fleet(t.Name)
		scaleFleet(&fl, f)
		t.Client.Timeout, t.Client.Deadline = fl.Timeout, fl.Deadline
		t.Client.Retry, t.Client.Budget, t.Client.Breaker, t.Client.Hedge = fl.Retry, fl.Budget, fl.Breaker, fl.Hedge
		t.Client.Balancer, t.Client.OutlierDetection = fl.Balancer, fl.OutlierDetection
		t.Client.Pool.WaitTimeout = d(t.Client.Pool.WaitTimeout)
		if c := t.Cache; c != nil {
			cc := *c
			cc.TTL, cc.ServeStale, cc.Latency = d(c.TTL), d(c.ServeStale), d(c.Latency)
			t.Cache = &cc
		}
	}
	s.Fleets = slices.Clone(sc.Fleets)
	for i := range s.Fleets {
		scaleFleet(&s.Fleets[i], f)
		if tr := s.Fleets[i].Traffic; tr != nil {
			c := *tr
			scaleTraffic(&c, f)
			s.Fleets[i].Traffic = &c
		}
	}
	return &s
}

// scaleTraffic scales an open loop's rates and a closed loop's think
// time by f, as Scale does: the scenario's traffic, or a fleet's own.
func scaleTraffic(t *scenario.Traffic, f float64) {
	d := func(x time.Duration) time.Duration { return time.Duration(float64(x) * f) }
	t.Rate, t.Think = t.Rate/f, d(t.Think)
	t.Ramp.From, t.Ramp.At, t.Ramp.For = t.Ramp.From/f, d(t.Ramp.At), d(t.Ramp.For)
	if sr := t.Series; sr != nil {
		c := *sr
		c.Scale /= f
		c.Points = slices.Clone(c.Points)
		for i := range c.Points {
			c.Points[i].At = d(c.Points[i].At)
		}
		t.Series = &c
	}
}

// scaleOrigin scales a server by f, as Scale does: the origin's, or a
// tier's.
func scaleOrigin(o *scenario.Origin, f float64) {
	d := func(x time.Duration) time.Duration { return time.Duration(float64(x) * f) }
	o.Capacity /= f
	o.Latency, o.Base, o.PerInflight = d(o.Latency), d(o.Base), d(o.PerInflight)
	o.MaxQueueTime, o.Shed.ServiceTime, o.Shed.Reserve = d(o.MaxQueueTime), d(o.Shed.ServiceTime), d(o.Shed.Reserve)
	if o.Limit.Use == scenario.LimitGradient && o.Limit.Window == 0 {
		o.Limit.Window = defaultLimitWindow // resil's default is in real seconds
	}
	o.Limit.SlowRTT, o.Limit.Window = d(o.Limit.SlowRTT), d(o.Limit.Window)
	o.ServiceTime = o.ServiceTime.Scaled(f) // a copy: the scenario's own stay as they are
}

// serviceStream marks the random streams of the lab's servers' service
// times, apart from their error draws' (stream, in the low bits).
const serviceStream = 0x5e7 << 48

// serviceRand returns the source a lab server draws its service times
// from, or nil when o's are fixed.
func serviceRand(seed uint64, o *scenario.Origin, stream uint64) *rand.Rand {
	if o.ServiceTime.IsFixed() {
		return nil
	}
	return rand.New(rand.NewPCG(seed, serviceStream|stream))
}

// scaleFleet scales a fleet's policy by f, as Scale does: a fleet's, or a
// tier's client.
func scaleFleet(fl *scenario.Fleet, f float64) {
	d := func(x time.Duration) time.Duration { return time.Duration(float64(x) * f) }
	r := func(x float64) float64 { return x / f }
	fl.Timeout, fl.Deadline = d(fl.Timeout), d(fl.Deadline)
	b := &fl.Retry.Backoff
	b.Base, b.Cap = d(b.Base), d(b.Cap)
	w := &fl.Budget.Window
	if fl.Budget.Use == scenario.BudgetWindow && w.TTL == 0 {
		w.TTL = defaultTTL // resil's default is in real seconds
	}
	w.TTL = d(w.TTL)
	w.MinRetriesPerSecond = r(w.MinRetriesPerSecond)
	// The AWS adaptive mode's rate limiter: its floor is a rate, and
	// CUBIC's C a rate per second cubed. Its send-rate measurement
	// keeps the SDKs' half-second buckets, which are not scaled: in a
	// scaled lab it is an approximation.
	p := &fl.Budget.Pacer
	p.MinFillRate = r(p.MinFillRate)
	p.ScaleConstant /= f * f * f * f
	br := &fl.Breaker
	if br.Use != "" && br.Use != scenario.BreakerNone && br.Cooldown == 0 {
		br.Cooldown = defaultCooldown // resil's default is in real seconds
	}
	br.WindowPeriod, br.SlowCall = d(br.WindowPeriod), d(br.SlowCall)
	br.Cooldown, br.MaxCooldown = d(br.Cooldown), d(br.MaxCooldown)
	fl.Hedge.Delay = d(fl.Hedge.Delay)
	fl.Pool.WaitTimeout = d(fl.Pool.WaitTimeout)
	if fl.Throttle.Use == scenario.ThrottleAdaptive && fl.Throttle.Window == 0 {
		fl.Throttle.Window = defaultThrottleWindow // resil's default is in real seconds
	}
	fl.Throttle.Window = d(fl.Throttle.Window)
	// The detector's and the EWMA picker's defaults are in real seconds:
	// written out first, then scaled (resil/outlier.Settings,
	// resil/balance.Settings).
	od := &fl.OutlierDetection.Settings
	if fl.OutlierDetection.Detects() {
		od.Interval = cmp.Or(od.Interval, defaultODInterval)
		od.BaseEjectionTime = cmp.Or(od.BaseEjectionTime, defaultODBaseEjection)
		if od.MaxEjectionTime == 0 {
			od.MaxEjectionTime = max(defaultODMaxEjection, od.BaseEjectionTime)
		}
	}
	od.Interval, od.BaseEjectionTime = d(od.Interval), d(od.BaseEjectionTime)
	od.MaxEjectionTime, od.MaxEjectionTimeJitter = d(od.MaxEjectionTime), d(od.MaxEjectionTimeJitter)
	bal := &fl.Balancer
	if bal.Use == scenario.BalancerEWMA {
		bal.Decay, bal.DefaultRTT = cmp.Or(bal.Decay, defaultEWMADecay), cmp.Or(bal.DefaultRTT, defaultEWMARTT)
	}
	bal.Decay, bal.DefaultRTT = d(bal.Decay), d(bal.DefaultRTT)
}

// resil's defaults of the outlier detector (outlier.Settings) and of the
// EWMA picker (balance.Settings), in real time.
const (
	defaultODInterval     = 10 * time.Second
	defaultODBaseEjection = 30 * time.Second
	defaultODMaxEjection  = 300 * time.Second
	defaultEWMADecay      = 10 * time.Second
	defaultEWMARTT        = 30 * time.Millisecond
)
