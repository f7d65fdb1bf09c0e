// Package freshness is a cache's overload decisions about its entries,
// by the time it is given: how long a new entry stays fresh, and what a
// lookup may do with one that is not (see [Policy]).
package freshness

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/retrystorm/retrystorm/resil"
)

// Policy is a cache's overload decisions about its entries, by the
// time it is given: how long a new entry stays fresh, and what a lookup
// may do with one that is not. A cache is a load shedder for the service
// behind it, and two of its habits decide whether it keeps shedding when
// that service is in trouble:
//
//   - entries stored together expire together, and every caller that
//     finds one expired fetches it again at once: a TTL without jitter
//     turns one bulk fill (a deploy, a restart, the refill after a flush)
//     into a stampede one TTL later, and another after that. Jitter
//     spreads each entry's life over TTL × [1 − Jitter, 1 + Jitter].
//   - an expired entry is usually still good enough. Serving it while one
//     fetch refreshes it (RFC 5861's stale-while-revalidate) keeps the
//     load on the service at one fetch per key however many callers ask;
//     serving it when the fetch fails (stale-if-error) keeps the callers
//     answered while the service is down.
//
// Concurrent fetches of one key are the other half of a stampede: a
// service coalesces them with golang.org/x/sync/singleflight (one fetch,
// every caller waits for it), which resil does not rewrite. The
// retrystorm simulator models coalescing itself, and drives a Policy for
// its caches' other decisions.
//
// The zero value keeps an entry fresh for ever and serves nothing stale.
// A plain value, safe to copy and share.
type Policy struct {
	// TTL is how long a new entry is fresh; zero means for ever.
	TTL time.Duration
	// Jitter spreads each TTL uniformly over TTL × [1 − Jitter,
	// 1 + Jitter]; in [0, 1).
	Jitter float64
	// StaleWhileRevalidate is how long past its expiry an entry may
	// still be served while one fetch refreshes it; zero serves none.
	StaleWhileRevalidate time.Duration
	// StaleIfError is how long past its expiry an entry may still be
	// served when its fetch fails; zero serves none.
	StaleIfError time.Duration
}

// State is what a lookup may do with an entry (see [Policy.State]).
type State uint8

const (
	// Fresh: serve it.
	Fresh State = iota
	// Stale: serve it, and refresh it (one fetch per key).
	Stale
	// Expired: fetch it before answering.
	Expired
)

var stateNames = [...]string{"fresh", "stale", "expired"}

// String returns "fresh", "stale" or "expired".
func (s State) String() string {
	if int(s) < len(stateNames) {
		return stateNames[s]
	}
	return fmt.Sprintf("State(%d)", uint8(s))
}

// Validate reports the first invalid field, or nil.
func (f Policy) Validate() error {
	const p = "freshness.Policy."
	switch {
	case f.TTL < 0:
		return badSetting(p+"TTL", f.TTL, "must not be negative")
	case math.IsNaN(f.Jitter) || math.IsInf(f.Jitter, 0) || f.Jitter < 0 || f.Jitter >= 1:
		return badSetting(p+"Jitter", f.Jitter, "must be in [0, 1)")
	case f.Jitter > 0 && f.TTL == 0:
		return badSetting(p+"Jitter", f.Jitter, "spreads the TTL, and TTL is zero (entries never expire)")
	case f.StaleWhileRevalidate < 0:
		return badSetting(p+"StaleWhileRevalidate", f.StaleWhileRevalidate, "must not be negative")
	case f.StaleIfError < 0:
		return badSetting(p+"StaleIfError", f.StaleIfError, "must not be negative")
	}
	return nil
}

func badSetting(field string, value any, reason string) error {
	return &resil.SettingError{Field: field, Value: value, Reason: reason}
}

// uniform is a draw in [0, 1) from src's low 53 bits, as resil's backoff
// draws its jitter.
func uniform(src rand.Source) float64 {
	return float64(src.Uint64()<<11>>11) / (1 << 53)
}

// Expires returns when an entry stored at now stops being fresh: now +
// TTL, spread by Jitter with one draw from src, which may be nil when
// Jitter is zero (a service passes a rand.NewPCG of its own, a simulator
// its seeded stream). It returns the zero time for an entry that never
// expires (TTL zero). Like Backoff.Delay, it assumes a valid Policy
// and does not allocate.
func (f Policy) Expires(now time.Time, src rand.Source) time.Time {
	if f.TTL <= 0 {
		return time.Time{}
	}
	ttl := float64(f.TTL)
	if f.Jitter > 0 {
		ttl *= 1 + f.Jitter*(2*uniform(src)-1)
	}
	return now.Add(time.Duration(ttl))
}

// State says what a lookup at now may do with an entry that expires at
// expires (the zero time: never): serve it while fresh; serve it and
// refresh it within StaleWhileRevalidate of its expiry; fetch it after.
// An entry is fresh up to its expiry, inclusive.
func (f Policy) State(now, expires time.Time) State {
	switch {
	case expires.IsZero() || !now.After(expires):
		return Fresh
	case !now.After(expires.Add(f.StaleWhileRevalidate)):
		return Stale
	}
	return Expired
}

// ServeOnError reports whether an entry that expires at expires may be
// served at now because its fetch failed: within StaleIfError of its
// expiry (a fresh entry, which needs no fetch, may always be served).
func (f Policy) ServeOnError(now, expires time.Time) bool {
	return expires.IsZero() || !now.After(expires.Add(f.StaleIfError))
}
