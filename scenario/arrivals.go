package scenario

import (
	"time"

	"go.yaml.in/yaml/v3"
)

// Arrivals beyond the steady open loop (issue 39): closed-loop clients,
// which wait for each intent to end and think before the next, as users
// at a screen or a worker pool draining a job queue do; and a ramp of the
// open loop's rate. A closed loop offers less when the system slows down;
// an open loop does not: the difference decides whether a slow origin
// sheds its load or drowns in it.

// ArrivalsClosed is the closed loop (Traffic.Arrivals): each client sends
// its next intent Think after its last one ended, won or lost.
const ArrivalsClosed = "closed"

// Think-time distributions (Traffic.ThinkDist).
const (
	ThinkFixed       = "fixed"       // every wait is Think
	ThinkExponential = "exponential" // waits drawn with mean Think
)

var thinkDists = []string{ThinkFixed, ThinkExponential}

// Closed reports whether the traffic is a closed loop.
func (t *Traffic) Closed() bool { return t.Arrivals == ArrivalsClosed }

// Ramp changes an open loop's intent rate linearly: it is From until At,
// then moves in a straight line to the traffic's rate over For, and is the
// rate from then on. A ramp up starts low (From 0, the default); a ramp
// down starts high. Like a series, it sets each tick's rate at the tick's
// start.
type Ramp struct {
	From float64       // intents per second until At; default 0
	At   time.Duration // when the ramp starts; default 0s
	For  time.Duration // how long it takes; required, > 0
}

func rampValue(r *Ramp) value {
	return given{unlessUnset{o: rampObject(r), set: func() bool { return *r != Ramp{} }},
		"for", "must be more than 0, got 0s (leave ramp out for none)"}
}

func rampObject(r *Ramp) *object {
	return &object{
		fields: []field{
			{key: "from", v: number{&r.From}},
			{key: "at", v: duration{&r.At}},
			{key: "for", need: true, v: duration{&r.For}},
		},
	}
}

// rampAt is the ramped rate at the start of at's tick.
func (t *Traffic) rampAt(at, tick time.Duration) float64 {
	if tick > 0 {
		at -= at % tick
	}
	r := t.Ramp
	switch {
	case at < r.At:
		return r.From
	case at >= r.At+r.For:
		return t.Rate
	}
	return r.From + (t.Rate-r.From)*float64(at-r.At)/float64(r.For)
}

// checkArrivals holds the rules of closed loops and ramps.
func (t *Traffic) checkArrivals(c *checker, path string) {
	at := func(key string) string { return join(path, key) }
	if t.Closed() {
		switch {
		case t.Rate != 0 || t.Series != nil:
			key := "rate"
			if t.Series != nil {
				key = "series"
			}
			c.fail(at(key), "does not apply to arrivals: closed: closed-loop clients send their next intent when the last one ends, after think")
		case t.Ramp != Ramp{}:
			c.fail(at("ramp"), "does not apply to arrivals: closed: set clients and think instead")
		}
		in(c, at("think"), t.Think, 0, maxWait)
		return
	}
	if t.Think != 0 {
		c.fail(at("think"), "applies to arrivals: closed only")
	}
	if t.ThinkDist != "" && t.ThinkDist != ThinkFixed {
		c.fail(at("think_dist"), "applies to arrivals: closed only")
	}
	if t.Ramp == (Ramp{}) {
		return
	}
	rp := at("ramp")
	switch {
	case t.Series != nil:
		c.fail(rp, "and a series both shape the rate: write the ramp into the series")
	case t.Ramp.For <= 0:
		c.fail(join(rp, "for"), "must be more than 0, got %s", show(t.Ramp.For))
	}
	in(c, join(rp, "from"), t.Ramp.From, 0, maxRate)
	in(c, join(rp, "at"), t.Ramp.At, 0, maxRun)
	in(c, join(rp, "for"), t.Ramp.For, 0, maxRun)
}

// optWord is a word that may be left unset: "" is neither written nor
// refused. Its map's finish sets it where it applies.
type optWord struct{ word }

func (v optWord) write() *yaml.Node {
	if *v.p == "" {
		return nil
	}
	return v.word.write()
}

func (v optWord) validate(c *checker, path string) {
	if *v.p != "" {
		v.word.validate(c, path)
	}
}
