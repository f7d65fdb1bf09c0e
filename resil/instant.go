package resil

import "time"

// instant is a time that is read from the Guard's clock at most once, and
// only if some decision needs it. The policies take the time as an
// argument, but on the success path of a guarded call most of them never
// look at it (a closed breaker, a token bucket), and reading the clock can
// cost more than the rest of the path: the Guard hands them an instant, the
// exported methods one that is already set.
type instant struct {
	t time.Time
	g *Guard           // non-nil: not read yet, from the Guard's clock
	f func() time.Time // non-nil: not read yet, from a caller's clock
}

// at returns an instant already set to t.
func at(t time.Time) instant { return instant{t: t} }

// lazy returns an instant read from now on first use; a nil now is
// time.Now.
func lazy(now func() time.Time) instant {
	if now == nil {
		now = time.Now
	}
	return instant{f: now}
}

// get reads the clock on first use.
func (i *instant) get() time.Time {
	if i.g != nil {
		i.t, i.g = i.g.Now(), nil
	} else if i.f != nil {
		i.t, i.f = i.f(), nil
	}
	return i.t
}
