package sim

import (
	"time"

	"github.com/retrystorm/retrystorm/origin"
	"github.com/retrystorm/retrystorm/scenario"
)

// The servers of the system engine: a tier's replicas, whose work for a
// request is their own service and then a call to the next layer, and
// the origin's, which answer. Both are package origin's models, driven as
// the other engine drives them (fleet.go's origin, chain.go's tiers).

// layer is one layer of the chain.
type layer struct {
	name    string
	servers []origin.Model // nil for a cache
	origin  bool
	cache   *cache
	calls   int // the group of its calls to the next layer; -1 for the origin
	errRate float64
	broken  float64
}

// queued is the layer's queue series: its servers' queues, or the
// attempts waiting for a cache's fills.
func (l *layer) queued() int64 {
	if l.cache != nil {
		return l.cache.waiting
	}
	n := 0
	for _, m := range l.servers {
		n += m.Queued()
	}
	return int64(n)
}

// sreq is an attempt as a server sees it, from its arrival until the
// server is done with it.
type sreq struct {
	id, root uint64
	deadline int64
	att      int32 // the attempt waiting for it, or -1 once its client stopped waiting
	call     int32 // a tier's call for it, while calling
	cgen     uint32
	gen      uint32
	n        int32
	tick     int32
	group    int32 // its caller's
	replica  uint16
	layer    uint8
	serving  bool
	calling  bool
	uncalled bool // its call was cancelled: the tier answers nobody
	blind    bool // its caller does not propagate deadlines
	broken   bool
}

// take returns a free request slot.
func (s *system) take() int32 { return slot(&s.reqs, &s.freeR, sreq{gen: 1}) }

// slot returns the index of a free slot of *tab, the last one freed, or of
// a new one, fresh: a slot taken again keeps its fields (its generation
// among them) until the caller sets them.
func slot[T any](tab *[]T, free *[]int32, fresh T) int32 {
	if n := len(*free); n > 0 {
		i := (*free)[n-1]
		*free = (*free)[:n-1]
		return i
	}
	*tab = append(*tab, fresh)
	return int32(len(*tab) - 1)
}

// releaseReq frees request r: its server is done with it.
func (s *system) releaseReq(r int32) {
	s.reqs[r].gen++
	s.freeR = append(s.freeR, r)
}

// arrive is attempt ai (the n-th of its intent) reaching server layer l
// at its replica, at now. At the origin an outage decides first.
func (s *system) arrive(l *layer, ai, n int32, now int64) {
	a := &s.atts[ai]
	in := &s.ints[a.intent]
	g := &s.groups[in.group]
	out, mode := false, ""
	if l.origin {
		out, mode = s.env.outage, s.env.mode
		if m := s.env.repOut; m != nil && !out && m[a.replica] != "" {
			out, mode = true, m[a.replica]
		}
		if out && mode == scenario.OutageBlackhole {
			return // nothing answers; the origin never sees it
		}
	}
	r := s.take()
	x := &s.reqs[r]
	*x = sreq{
		id: in.id, root: in.root, deadline: a.deadline, att: ai, call: -1, gen: x.gen, n: n, tick: a.tick,
		group: in.group, replica: a.replica, layer: uint8(g.to), broken: in.broken,
		blind: g.fleet < 0 && !g.propagate,
	}
	a.where, a.req = atServer, r
	if out && mode == scenario.OutageRefuse {
		s.q.push(mkEvent(now+rejectDelay, r, x.gen, sysAnswer, answerRefused), laneReject)
		return
	}
	l.servers[a.replica].Arrive(time.Duration(now), origin.Request(r))
}

// layerDriver is the system as the driver of one layer's servers.
type layerDriver struct {
	s *system
	l int
}

func (d *layerDriver) Answer(r origin.Request, at time.Duration) {
	s := d.s
	x := &s.reqs[r]
	if s.layers[d.l].origin {
		s.q.push(mkEvent(int64(at), int32(r), x.gen, sysAnswer, s.outcome(x)), laneAnswer)
		return
	}
	s.q.push(mkEvent(int64(at), int32(r), x.gen, sysTierWork, 0), laneAnswer)
}

func (d *layerDriver) Serve(r origin.Request, _, end time.Duration) {
	s := d.s
	x := &s.reqs[r]
	x.serving = true
	kind := sysTierWork
	if s.layers[d.l].origin {
		kind = sysComplete
	}
	s.q.push(mkEvent(int64(end), int32(r), x.gen, kind, 0), laneComplete)
}

func (d *layerDriver) Reject(r origin.Request, now time.Duration) {
	s := d.s
	kind := sysTierReply
	if s.layers[d.l].origin {
		kind = sysAnswer
	}
	s.q.push(mkEvent(int64(now)+rejectDelay, int32(r), s.reqs[r].gen, kind, answerThrottled), laneReject)
}

func (d *layerDriver) Drop(r origin.Request, now time.Duration) {
	s := d.s
	x := &s.reqs[r]
	x.serving = false
	if x.calling && !x.uncalled {
		x.uncalled = true
		s.cancel(x.call, x.cgen, int64(now))
		x = &s.reqs[r]
	}
	if x.tick >= 0 {
		s.groups[x.group].sum.Dropped++
	}
	if x.att >= 0 {
		a := &s.atts[x.att]
		a.where, a.req = atNone, -1 // its client will time out
	}
	s.releaseReq(int32(r))
}

func (d *layerDriver) Deadline(r origin.Request) (time.Duration, bool, bool) {
	x := &d.s.reqs[r]
	return time.Duration(x.deadline), !x.blind, x.att < 0
}

// outcome draws whether the origin's answer to x is a success.
func (s *system) outcome(x *sreq) uint8 {
	rate := s.env.errRate
	if s.env.repErr != nil {
		rate = s.env.repErr[x.replica]
	}
	if x.broken || (rate > 0 && draw(s.seed, x.id, int(x.n), drawError) < rate) {
		return 0
	}
	return answerOK
}

// layerEvent handles the events of the servers.
func (s *system) layerEvent(e *event) {
	r := e.ref()
	x := &s.reqs[r]
	if x.gen != e.gen() {
		return
	}
	switch e.kind() {
	case sysAnswer:
		if !s.stalled(e) {
			s.answer(r, e.at, e.aux())
		}
	case sysComplete:
		if !s.stalled(e) {
			x.serving = false
			m := s.layers[x.layer].servers[x.replica]
			s.answer(r, e.at, s.outcome(x))
			m.Done(time.Duration(e.at), origin.Request(r))
		}
	case sysTierWork:
		s.tierWork(r, e.at)
	case sysTierReply:
		s.tierReply(r, e.at, e.aux())
	}
}

// stalled puts off an answer of the origin to the end of a stall in
// force, and reports whether it did.
func (s *system) stalled(e *event) bool {
	if !s.env.outage || s.env.mode != scenario.OutageStall || s.envAt+1 >= len(s.sched.at) {
		return false
	}
	later := *e
	later.at = s.sched.at[s.envAt+1]
	s.q.push(later, laneHeap)
	return true
}

// answer is the origin's answer aux to request r at now: a success counts
// whoever waits for it; an answer nobody waits for is wasted work; one
// that a blackhole or a cut link loses never arrives.
func (s *system) answer(r int32, now int64, aux uint8) {
	x := &s.reqs[r]
	refused := s.env.outage && s.env.mode == scenario.OutageRefuse
	if s.env.repOut != nil && s.env.repOut[x.replica] == scenario.OutageRefuse {
		refused = true
	}
	if aux == answerOK && refused {
		aux = 0 // a reset connection
	}
	g := &s.groups[x.group]
	if aux == answerOK && x.tick >= 0 {
		g.ticks[x.tick].successes++
	}
	att, counted, rep := x.att, x.tick >= 0, x.replica
	x.att = -1
	s.releaseReq(r)
	if att < 0 {
		if counted {
			g.sum.WastedWork++
		}
		return
	}
	blackhole := s.env.outage && s.env.mode == scenario.OutageBlackhole
	if blackhole || (s.env.repOut != nil && s.env.repOut[rep] == scenario.OutageBlackhole) {
		s.atts[att].where, s.atts[att].req = atNone, -1 // lost: its client will time out
		return
	}
	s.receive(att, now, aux)
}

// left is the client of request r giving up on it at now.
func (s *system) left(r int32, now int64) {
	x := &s.reqs[r]
	if !s.layers[x.layer].origin {
		s.tierLeft(r, now)
		return
	}
	x.att = -1
	if x.serving {
		s.layers[x.layer].servers[x.replica].Left(time.Duration(now), origin.Request(r))
	}
}
