package origin

// Fork returns a copy of m in its present state that reports to d, for a
// simulator that plays one history on in several ways (a warm-up shared
// by several faults). ok is false for a model whose state it does not
// copy: one that draws its service times, sheds by deadline, drops
// expired requests or waits in an admission queue, and any model but the
// queue and concurrency models. The copy shares nothing with m.
func Fork(m Model, d Driver) (Model, bool) {
	switch m := m.(type) {
	case *Queue:
		if m.sampler != nil || m.wq != nil || m.shed || m.dropExpired || m.estimate != nil || m.expiry != nil {
			return nil, false
		}
		c := *m
		c.d = d
		c.q = deque{buf: make([]Request, len(m.q.buf)), head: m.q.head, size: m.q.size}
		copy(c.q.buf, m.q.buf)
		return &c, true
	case *Concurrency:
		if m.sampler != nil {
			return nil, false
		}
		c := *m
		c.d = d
		return &c, true
	}
	return nil, false
}
