package sim

import (
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/retrystorm/retrystorm/scenario"
)

// arrivals is one fleet's stream of intents in the system engine: an open
// loop at the rate its traffic and its load and burst triggers give, or a
// closed loop of clients that each think between one intent's end and
// the next.
type arrivals struct {
	slot    int // the fleet's place in the run, and its group's
	traffic *scenario.Traffic
	rng     *rand.Rand
	poisson bool
	idBase  uint64
	count   uint64
	clients int32
	client  int32 // the next open-loop intent's client (round robin)

	// Open loop: the next arrival, and the rate's schedule.
	next  int64
	at    []int64
	rate  []float64
	soft  []bool // a change a series or a ramp makes: constant arrivals keep their phase
	phase int    // the rate in force: rate[phase]

	// Closed loop: each client's wait between an intent's end and its
	// next.
	closed   bool
	thinkNs  int64
	thinkExp bool
}

// arrivalStream marks the fleets' arrival streams: the first fleet's is
// the other engine's, so that a fleet sees the same arrivals in both.
const arrivalStream = 0xa77

func newArrivals(s *system, slot, fleet int) arrivals {
	sc := s.sc
	t := sc.TrafficOf(fleet)
	a := arrivals{
		slot: slot, traffic: t, poisson: t.Arrivals == "poisson",
		rng:     rand.New(rand.NewPCG(sc.Seed, arrivalStream+uint64(slot)<<32)),
		idBase:  uint64(slot) << 40,
		clients: int32(max(t.Clients, 1)),
		next:    math.MaxInt64,
		closed:  t.Closed(), thinkNs: int64(t.Think), thinkExp: t.ThinkDist == scenario.ThinkExponential,
	}
	if a.closed {
		return a
	}
	a.schedule(sc, sc.Fleets[fleet].Name)
	a.next = a.first(0)
	return a
}

// schedule computes the rate from each of its changes on: a series' or a
// ramp's ticks, and the fleet's load and burst triggers' bounds.
func (a *arrivals) schedule(sc *scenario.Scenario, name string) {
	var trig []scenario.Trigger
	points := []int64{0}
	for _, t := range sc.Triggers {
		if (t.Kind == scenario.TriggerLoad || t.Kind == scenario.TriggerBurst) && (t.Fleet == "" || t.Fleet == name) {
			trig = append(trig, t)
			points = append(points, int64(t.At), int64(t.End()))
		}
	}
	soft := map[int64]bool{}
	for _, c := range a.traffic.RateChanges(sc.Tick, sc.Duration) {
		points = append(points, int64(c))
		soft[int64(c)] = true
	}
	slices.Sort(points)
	points = slices.Compact(points)
	for _, p := range points {
		base := scenario.Conditions{Rate: a.traffic.RateAt(time.Duration(p), sc.Tick)}
		a.at = append(a.at, p)
		a.rate = append(a.rate, scenario.At(base, trig, time.Duration(p)).Rate)
		a.soft = append(a.soft, soft[p])
	}
}

// gap is the time to the next open-loop arrival at the rate in force.
func (a *arrivals) gap() int64 {
	r := a.rate[a.phase]
	if r <= 0 {
		return math.MaxInt64
	}
	if a.poisson {
		return toGap(a.rng.ExpFloat64() / r * 1e9)
	}
	return toGap(1e9 / r)
}

// first is the first arrival at or after from.
func (a *arrivals) first(from int64) int64 {
	if a.rate[a.phase] <= 0 {
		return math.MaxInt64
	}
	if a.poisson {
		return satAdd(from, a.gap())
	}
	return from
}

// due is when the stream next does something: an arrival, or a change of
// its rate.
func (a *arrivals) due() int64 {
	if a.phase+1 < len(a.at) {
		return min(a.next, a.at[a.phase+1])
	}
	return a.next
}

// arrive is the stream's due moment: its rate changes, or an intent
// arrives.
func (a *arrivals) arrive(s *system, now int64) {
	if a.phase+1 < len(a.at) && a.at[a.phase+1] == now {
		old := a.rate[a.phase]
		a.phase++
		r := a.rate[a.phase]
		switch {
		case r == old:
		case a.soft[a.phase] && !a.poisson && old > 0 && r > 0 && a.next < math.MaxInt64:
			left := float64(a.next-now) * old / r
			a.next = satAdd(now, int64(min(left, math.MaxInt64/2)))
		default:
			a.next = a.first(now)
		}
		return
	}
	c := a.client
	if a.client++; a.client == a.clients {
		a.client = 0
	}
	a.next = satAdd(now, a.gap())
	s.fleetIntent(a, c, now)
}

// startClosed schedules every closed-loop client's first intent, spread
// over the first think time.
func (a *arrivals) startClosed(s *system) {
	for c := range a.clients {
		at := int64(0)
		if a.thinkNs > 0 {
			at = a.thinkNs * int64(c) / int64(a.clients)
		}
		s.q.push(mkEvent(at, c, uint32(a.slot), sysThink, 0), laneHeap)
	}
}

// think is closed-loop client c's next intent, at now.
func (a *arrivals) think(s *system, c int32, now int64) {
	if now < s.end {
		s.fleetIntent(a, c, now)
	}
}

// ended is an intent of client c ending at now: a closed-loop client
// thinks, then sends its next.
func (a *arrivals) ended(s *system, c int32, now int64) {
	if !a.closed {
		return
	}
	d := a.thinkNs
	if a.thinkExp && d > 0 {
		d = int64(a.rng.ExpFloat64() * float64(d))
	}
	// At least rejectDelay, the least a call takes to end (a refusal):
	// a client whose calls are all refused at once must still let time
	// move.
	s.q.push(mkEvent(satAdd(now, max(d, rejectDelay)), c, uint32(a.slot), sysThink, 0), laneHeap)
}

// fleetIntent starts an intent of the fleet of stream a, for its client
// c, at now.
func (s *system) fleetIntent(a *arrivals, c int32, now int64) {
	id := a.idBase | a.count
	a.count++
	g := &s.groups[a.slot]
	if k := s.tickOf(now); k >= 0 {
		g.ticks[k].intents++
	}
	i := s.newIntent()
	in := &s.ints[i]
	in.id, in.root, in.arrival, in.client, in.group = id, id, now, c, int32(a.slot)
	in.policy = g.base + c
	if g.deadline > 0 {
		in.latest = now + g.deadline
	}
	t := a.traffic
	in.in.Idempotent = true
	if g.idemOnly && t.Idempotent < 1 && draw(s.seed, id, 0, drawIdempotent) >= t.Idempotent {
		in.in.Idempotent = false
		if t.Keys > 0 && draw(s.seed, id, 0, drawKey) < t.Keys {
			in.in.Key = "key"
		}
	}
	in.broken = s.sc.Origin.Broken > 0 && draw(s.seed, id, 0, drawBroken) < s.sc.Origin.Broken
	in.after = s.hasClear && now >= s.clearAt
	s.start(i, now)
}
