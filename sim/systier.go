package sim

import (
	"math/rand/v2"
	"time"

	"github.com/retrystorm/retrystorm/origin"
	"github.com/retrystorm/retrystorm/resil"
	"github.com/retrystorm/retrystorm/resil/balance"
	"github.com/retrystorm/retrystorm/scenario"
)

// Calls between layers in the system engine: a tier's call for one of its
// requests, a cache's fill for one of its keys. They are chain.go's, for
// the system engine's tables.

// newCall makes an intent of group g (a layer's calls to the next),
// under its policy number p, serving parent (a tier request or a fill),
// for the fleet's intent root: its facts (idempotency, broken key) carry
// over, its draws are its own. The caller starts it.
func (s *system) newCall(g int, p int32, parent int32, root uint64, broken bool, now int64, salt uint64) int32 {
	gr := &s.groups[g]
	j := s.newIntent()
	in := &s.ints[j]
	in.group, in.policy, in.parent, in.root, in.broken = int32(g), gr.base+p, parent, root, broken
	in.id = mix(root ^ uint64(gr.to)<<56 ^ salt<<20 ^ uint64(uint32(parent)))
	in.arrival = now
	if gr.deadline > 0 {
		in.latest = now + gr.deadline
	}
	in.in = resil.Intent{Idempotent: true}
	t := &s.sc.Traffic
	if gr.idemOnly && t.Idempotent < 1 && draw(s.seed, root, 0, drawIdempotent) >= t.Idempotent {
		in.in.Idempotent = false
		if t.Keys > 0 && draw(s.seed, root, 0, drawKey) < t.Keys {
			in.in.Key = "key"
		}
	}
	in.after = s.hasClear && now >= s.clearAt
	if k := s.tickOf(now); k >= 0 {
		gr.ticks[k].intents++
	} else {
		in.late = true
	}
	return j
}

// tierWork begins the call tier request r's tier makes for it, its own
// work being over; or, when its caller has left and the tier propagates
// deadlines, ends its service: there is nobody to call for.
func (s *system) tierWork(r int32, now int64) {
	x := &s.reqs[r]
	l := &s.layers[x.layer]
	g := &s.groups[l.calls]
	if x.att < 0 && g.propagate {
		s.endService(r, now)
		return
	}
	j := s.newCall(l.calls, int32(x.replica), r, x.root, x.broken, now, uint64(uint32(x.n)))
	x = &s.reqs[r]
	in := &s.ints[j]
	if g.propagate && !x.blind && (in.latest == 0 || x.deadline < in.latest) {
		in.latest = x.deadline
	}
	x.calling, x.call, x.cgen = true, j, in.gen
	s.start(j, now)
}

// callEnded is call in ending at now, won (ok) or lost: a fill tells its
// cache; a tier's call answers its request, when the event comes, unless
// the tier's own error share or broken keys fail it.
func (s *system) callEnded(in *sintent, ok bool, now int64) {
	l := &s.layers[s.groups[in.group].from]
	if in.fromFill {
		s.fillEnded(l, in.parent, ok, now)
		return
	}
	x := &s.reqs[in.parent]
	x.calling = false
	if ok && l.broken > 0 && draw(s.seed, x.root, int(x.layer)+1, drawBroken) < l.broken {
		ok = false
	}
	if ok && l.errRate > 0 && draw(s.seed, x.root, int(x.n)+(int(x.layer)+1)<<20, drawError) < l.errRate {
		ok = false
	}
	var aux uint8
	if ok {
		aux = answerOK
	}
	s.q.push(mkEvent(now, in.parent, x.gen, sysTierReply, aux), laneAnswer)
}

// tierReply is tier request r's answer reaching its caller at now; then
// its worker is free. A request whose call was cancelled answers nobody.
func (s *system) tierReply(r int32, now int64, aux uint8) {
	x := &s.reqs[r]
	if x.uncalled {
		s.endService(r, now)
		return
	}
	g := &s.groups[x.group]
	if aux == answerOK && x.tick >= 0 {
		g.ticks[x.tick].successes++
	}
	serving, l, rep, ai, counted := x.serving, x.layer, x.replica, x.att, x.tick >= 0
	x.serving = false
	s.releaseReq(r)
	if ai < 0 {
		if counted {
			g.sum.WastedWork++
		}
	} else {
		s.receive(ai, now, aux)
	}
	if serving {
		s.layers[l].servers[rep].Done(time.Duration(now), origin.Request(r))
	}
}

// endService ends request r's service at its tier without an answer.
func (s *system) endService(r int32, now int64) {
	x := &s.reqs[r]
	l, rep, serving := x.layer, x.replica, x.serving
	x.serving = false
	s.releaseReq(r)
	if serving {
		s.layers[l].servers[rep].Done(time.Duration(now), origin.Request(r))
	}
}

// tierLeft is the caller of tier request r giving up on it at now. A
// tier that propagates deadlines stops: its server hears it and its call
// is cancelled; one that does not works on for nobody.
func (s *system) tierLeft(r int32, now int64) {
	x := &s.reqs[r]
	x.att = -1
	if !s.groups[s.layers[x.layer].calls].propagate {
		return
	}
	gen := x.gen
	if x.serving {
		s.layers[x.layer].servers[x.replica].Left(time.Duration(now), origin.Request(r))
		x = &s.reqs[r]
	}
	if x.gen != gen || !x.calling || x.uncalled {
		return
	}
	x.uncalled = true
	s.cancel(x.call, x.cgen, now)
}

// wouldAnswer is the ground truth of a refused attempt (the n-th of
// intent in) at now: would the layers from the one its group calls have
// answered it in time?
func (s *system) wouldAnswer(in *sintent, n int32, now int64) bool {
	g := &s.groups[in.group]
	timeout := g.timeout
	if in.latest > 0 {
		timeout = min(timeout, in.latest-now)
	}
	for l := g.to; ; l++ {
		ly := &s.layers[l]
		switch {
		case ly.cache != nil:
			if ly.cache.holds(s, in.root, now) {
				return true
			}
		case !ly.origin:
			r := 0
			if len(ly.servers) > 1 {
				r = int(draw(s.seed, in.id, int(n)+l<<20, drawReplica) * float64(len(ly.servers)))
			}
			if !ly.servers[r].WouldAnswer(time.Duration(now), time.Duration(timeout)) {
				return false
			}
		default:
			return s.originWouldAnswer(ly, in, n, now, timeout)
		}
		timeout = min(timeout, s.groups[ly.calls].timeout)
	}
}

func (s *system) originWouldAnswer(ly *layer, in *sintent, n int32, now, timeout int64) bool {
	if s.env.outage || in.broken {
		return false
	}
	r := 0
	if len(ly.servers) > 1 {
		r = int(draw(s.seed, in.id, int(n), drawReplica) * float64(len(ly.servers)))
	}
	rate := s.env.errRate
	if s.env.repErr != nil {
		if s.env.repOut[r] != "" {
			return false
		}
		rate = s.env.repErr[r]
	}
	if rate > 0 && draw(s.seed, in.id, int(n), drawError) < rate {
		return false
	}
	return ly.servers[r].WouldAnswer(time.Duration(now), time.Duration(timeout))
}

// replicaPick is a group's picker (resil/balance) over the replicas of
// the layer it calls.
type replicaPick struct{ bal balance.Picker }

func newReplicaPick(s *system, b *scenario.Balancer, hosts int, key uint64) (*replicaPick, error) {
	if b.Use == "" {
		return nil, nil
	}
	bal, err := b.NewPicker(hosts, nil, rand.NewPCG(s.seed, pickerStream|key))
	if err != nil {
		return nil, err
	}
	return &replicaPick{bal}, nil
}

// pickReplica chooses attempt a's replica: its group's picker's, or one
// at random. It reports false when the picker has none.
func (s *system) pickReplica(g *group, a *sattempt, in *sintent, n int32, now int64) bool {
	k := len(s.layers[g.to].servers)
	switch {
	case g.picker != nil:
		r, err := g.picker.bal.Pick(s.vt(now))
		if err != nil {
			return false
		}
		a.replica, a.picked = uint16(r), true
	case k > 1:
		a.replica = uint16(draw(s.seed, in.id, int(n), drawReplica) * float64(k))
	}
	return true
}

// done tells the picker how attempt a ended.
func (p *replicaPick) done(s *system, a *sattempt, now int64, kind resil.Outcome) {
	a.picked = false
	p.bal.Done(s.vt(now), int(a.replica), time.Duration(now-a.sent), policyOutcome(kind))
}

// cut is a partition of the link from a caller group to the layer it
// calls, from at to end.
type cut struct {
	group   int
	at, end int64
}

// partitioned reports whether group g's link is cut at now.
func (s *system) partitioned(g int, now int64) bool {
	for _, c := range s.cuts {
		if c.group == g && now >= c.at && now < c.end {
			return true
		}
	}
	return false
}
