package sim

import "github.com/retrystorm/retrystorm/resil"

// A connection pool on the calling side of a hop (scenario.Pool): one per
// client of a fleet, per replica of a tier, per cache. An attempt takes a
// connection before it goes to the layer and gives it back when its
// client is done with it; when none is free it waits, first come first
// served, until a connection frees, its pool's wait timeout passes (the
// pool answers with a rejection) or its own timeout does. A full wait
// queue refuses it, rejectDelay later (at once, but not in zero time,
// so that a client retrying without backoff still lets time move).

// pool is one caller's pool.
type pool struct {
	size, inUse int32
	limit       int32 // the most attempts waiting; 0 is no limit
	wait        int64 // the wait timeout; 0 is none
	q           []waiter
	head        int
	waiting     int32 // attempts waiting: q less those that left
}

// waiter is an attempt waiting for a pool's connection or a cache's fill,
// by its slot and generation (it may have left since).
type waiter struct {
	att int32
	gen uint32
}

// poolCounts are what a group's pools did, counted by the tick the
// attempt was sent in (only attempts sent during the run): every request
// ends acquired, timed out, rejected or abandoned.
type poolCounts struct {
	requests, acquired, waited, timeouts, rejected, abandoned int64
	waitingAt, inUseAt                                        []int64 // sampled at each tick's end
}

// answerLocal is a pool's rejection, which no link can lose.
const answerLocal = 4

// acquire takes a connection of attempt ai's pool for it, and delivers
// it; or queues it, or refuses it.
func (s *system) acquire(ai int32, now int64) {
	a := &s.atts[ai]
	in := &s.ints[a.intent]
	p := &s.pools[in.policy]
	c := &s.groups[in.group].pools
	counted := a.tick >= 0
	if counted {
		c.requests++
	}
	switch {
	case p.inUse < p.size:
		p.inUse++
		a.conn = true
		if counted {
			c.acquired++
		}
		s.deliver(ai, a.n, now)
	case p.limit > 0 && p.waiting >= p.limit:
		a.where = atRefused // counted rejected when it hears so (refused)
		s.answerAt(ai, now+rejectDelay, answerLocal)
	default:
		p.q = append(p.q, waiter{ai, a.gen})
		p.waiting++
		a.where, a.poolWait = atPool, true
		if counted {
			c.waited++
		}
		if p.wait > 0 {
			s.q.push(mkEvent(now+p.wait, ai, a.gen, sysPoolTimeout, 0), laneHeap)
		}
	}
}

// release gives attempt ai's connection back at now, to the first
// attempt still waiting.
func (s *system) release(ai int32, now int64) {
	a := &s.atts[ai]
	if !a.conn {
		return
	}
	a.conn = false
	in := &s.ints[a.intent]
	p := &s.pools[in.policy]
	p.inUse--
	for p.head < len(p.q) {
		w := p.q[p.head]
		p.head++
		b := &s.atts[w.att]
		if b.gen != w.gen || b.where != atPool {
			continue // it left
		}
		p.waiting--
		p.inUse++
		b.conn, b.where = true, atNone
		if b.tick >= 0 {
			s.groups[s.ints[b.intent].group].pools.acquired++
		}
		s.deliver(w.att, b.n, now)
		break
	}
	if p.head == len(p.q) {
		p.q, p.head = p.q[:0], 0
	}
}

// poolGaveUp is attempt ai's pool's wait timeout: if it still waits, the
// pool answers it with a rejection.
func (s *system) poolGaveUp(ai int32, now int64) {
	a := &s.atts[ai]
	if a.where != atPool {
		return
	}
	s.dequeue(ai)
	if a.tick >= 0 {
		s.groups[s.ints[a.intent].group].pools.timeouts++
	}
	s.finish(ai, now, resil.OutcomeThrottled)
}

// abandonWait is attempt ai leaving its pool's queue, or the refusal of
// its full queue before it heard it: its client gave up.
func (s *system) abandonWait(ai int32) {
	a := &s.atts[ai]
	if a.where == atPool {
		s.dequeue(ai)
	}
	if a.tick >= 0 {
		s.groups[s.ints[a.intent].group].pools.abandoned++
	}
}

// refused is a full pool's refusal reaching attempt ai.
func (s *system) refused(ai int32) {
	if a := &s.atts[ai]; a.tick >= 0 {
		s.groups[s.ints[a.intent].group].pools.rejected++
	}
}

// dequeue takes attempt ai out of its pool's queue (its entry stays,
// and is skipped).
func (s *system) dequeue(ai int32) {
	a := &s.atts[ai]
	s.pools[s.ints[a.intent].policy].waiting--
	a.where = atNone
}

// samplePools records group g's pools at the end of tick t.
func (s *system) samplePools(g *group, t int) {
	if !g.pool.On() {
		return
	}
	var waiting, inUse int64
	for i := g.base; i < g.base+g.n; i++ {
		waiting += int64(s.pools[i].waiting)
		inUse += int64(s.pools[i].inUse)
	}
	g.pools.waitingAt[t], g.pools.inUseAt[t] = waiting, inUse
}
