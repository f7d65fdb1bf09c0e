package freshness

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/retrystorm/retrystorm/resil"
)

// TestPolicyState: what a lookup may do with an entry, on a grid of
// times around its expiry at 10s (stale-while-revalidate 5s,
// stale-if-error 30s).
func TestPolicyState(t *testing.T) {
	f := Policy{TTL: 10 * time.Second, StaleWhileRevalidate: 5 * time.Second, StaleIfError: 30 * time.Second}
	t0 := time.Unix(1000, 0)
	expires := t0.Add(10 * time.Second)
	for _, c := range []struct {
		at        time.Duration
		state     State
		onErrorOK bool
	}{
		{0, Fresh, true},
		{10 * time.Second, Fresh, true}, // fresh up to its expiry, inclusive
		{10*time.Second + 1, Stale, true},
		{15 * time.Second, Stale, true},
		{15*time.Second + 1, Expired, true},
		{40 * time.Second, Expired, true},
		{40*time.Second + 1, Expired, false},
	} {
		now := t0.Add(c.at)
		if got := f.State(now, expires); got != c.state {
			t.Errorf("State at %v = %v, want %v", c.at, got, c.state)
		}
		if got := f.ServeOnError(now, expires); got != c.onErrorOK {
			t.Errorf("ServeOnError at %v = %v, want %v", c.at, got, c.onErrorOK)
		}
	}
	// An entry without an expiry is fresh for ever; the zero Policy
	// serves nothing stale.
	if s := f.State(t0.Add(1000*time.Hour), time.Time{}); s != Fresh {
		t.Errorf("an entry that never expires is %v", s)
	}
	if s := (Policy{}).State(expires.Add(1), expires); s != Expired {
		t.Errorf("the zero Policy calls an expired entry %v", s)
	}
}

// TestPolicyExpires: the TTL, spread by the jitter within its bounds,
// and a mean near the TTL; no TTL, no expiry.
func TestPolicyExpires(t *testing.T) {
	t0 := time.Unix(1000, 0)
	if e := (Policy{}).Expires(t0, nil); !e.IsZero() {
		t.Errorf("no TTL expires at %v, want never (the zero time)", e)
	}
	if e := (Policy{TTL: time.Minute}).Expires(t0, nil); !e.Equal(t0.Add(time.Minute)) {
		t.Errorf("without jitter: %v, want %v", e, t0.Add(time.Minute))
	}
	f := Policy{TTL: 10 * time.Second, Jitter: 0.2}
	src := rand.NewPCG(1, 2)
	var sum time.Duration
	lo, hi := time.Duration(1<<62), time.Duration(0)
	const n = 10_000
	for range n {
		d := f.Expires(t0, src).Sub(t0)
		lo, hi = min(lo, d), max(hi, d)
		sum += d
	}
	if lo < 8*time.Second || hi > 12*time.Second {
		t.Errorf("jittered TTLs in [%v, %v], want within [8s, 12s]", lo, hi)
	}
	if hi-lo < 3900*time.Millisecond {
		t.Errorf("jittered TTLs in [%v, %v]: not spread over the range", lo, hi)
	}
	if mean := sum / n; mean < 9900*time.Millisecond || mean > 10100*time.Millisecond {
		t.Errorf("mean TTL %v, want 10s within 1%%", mean)
	}
}

func TestPolicyValidate(t *testing.T) {
	for _, c := range []struct {
		f     Policy
		field string
	}{
		{Policy{TTL: -1}, "freshness.Policy.TTL"},
		{Policy{TTL: time.Second, Jitter: 1}, "freshness.Policy.Jitter"},
		{Policy{Jitter: 0.1}, "freshness.Policy.Jitter"},
		{Policy{StaleWhileRevalidate: -1}, "freshness.Policy.StaleWhileRevalidate"},
		{Policy{StaleIfError: -1}, "freshness.Policy.StaleIfError"},
	} {
		err := c.f.Validate()
		var se *resil.SettingError
		if !errors.As(err, &se) || se.Field != c.field {
			t.Errorf("%+v: %v, want a SettingError on %s", c.f, err, c.field)
		}
	}
	if err := (Policy{TTL: time.Second, Jitter: 0.5, StaleWhileRevalidate: time.Minute}).Validate(); err != nil {
		t.Error(err)
	}
}

// A cache's entry through its life: fresh, then served stale while one
// fetch refreshes it, then fetched before it is served.
func ExamplePolicy() {
	f := Policy{TTL: 30 * time.Second, StaleWhileRevalidate: 10 * time.Second}
	stored := time.Unix(0, 0)
	expires := f.Expires(stored, nil) // no jitter: no draw
	for _, at := range []time.Duration{10 * time.Second, 35 * time.Second, 45 * time.Second} {
		fmt.Printf("at %v: %v\n", at, f.State(stored.Add(at), expires))
	}
	// Output:
	// at 10s: fresh
	// at 35s: stale
	// at 45s: expired
}
