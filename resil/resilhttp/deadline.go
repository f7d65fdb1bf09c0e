package resilhttp

import (
	"net/http"
	"strconv"
	"time"
)

// TimeoutHeader carries the time the caller has left for this request:
// the Transport sends it on every attempt, and the Shed middleware reads it.
//
// Its value is a timeout relative to when the request is received, as in
// gRPC's grpc-timeout header, and in gRPC's syntax: at most 8 digits and a
// unit, H (hours), M (minutes), S (seconds), m (milliseconds), u
// (microseconds) or n (nanoseconds), for example "250m" or "1500000u".
// Relative, because the two ends' clocks need not agree; the time the
// request spends on the wire is not counted, so a server should keep a
// little for the way back (DeadlineSettings.Reserve). Envoy follows the
// same idea with x-envoy-expected-rq-timeout-ms, which Shed reads too, so
// that a server behind Envoy hears the deadline without a client change.
const TimeoutHeader = "Resil-Timeout"

// EnvoyTimeoutHeader is Envoy's header for the time its route allows an
// upstream request, in whole milliseconds.
const EnvoyTimeoutHeader = "X-Envoy-Expected-Rq-Timeout-Ms"

// ShedHeader names, on a response the Shed middleware refused, why:
// "expired", "too_late", "caller_left", "limit", "queue_full" or
// "queue_timeout" (admission.ShedReason).
const ShedHeader = "Resil-Shed"

// timeoutUnits are grpc-timeout's units, finest first.
var timeoutUnits = [...]struct {
	d    time.Duration
	unit byte
}{
	{time.Nanosecond, 'n'}, {time.Microsecond, 'u'}, {time.Millisecond, 'm'},
	{time.Second, 'S'}, {time.Minute, 'M'}, {time.Hour, 'H'},
}

const maxTimeoutValue = 99_999_999 // 8 digits

// FormatTimeout writes d for TimeoutHeader, in the finest unit that fits in
// 8 digits, rounded down: the receiver never thinks it has more time than
// it has. A d of zero or less is "0n": no time left.
func FormatTimeout(d time.Duration) string {
	if d <= 0 {
		return "0n"
	}
	for _, u := range timeoutUnits {
		if v := d / u.d; v <= maxTimeoutValue {
			var b [12]byte
			out := strconv.AppendInt(b[:0], int64(v), 10)
			return string(append(out, u.unit))
		}
	}
	return "99999999H" // unreachable: a Duration is under 2.6 million hours
}

// ParseTimeout reads a TimeoutHeader value. It reports false for a value
// that is not 1 to 8 digits and a unit. A timeout too long for a Duration
// is the longest Duration.
func ParseTimeout(v string) (time.Duration, bool) {
	if len(v) < 2 || len(v) > 9 {
		return 0, false
	}
	var n int64
	for i := 0; i < len(v)-1; i++ {
		c := v[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	for _, u := range timeoutUnits {
		if u.unit == v[len(v)-1] {
			if n > int64(maxDuration/u.d) {
				return maxDuration, true
			}
			return time.Duration(n) * u.d, true
		}
	}
	return 0, false
}

const maxDuration = time.Duration(1<<63 - 1)

// TimeoutFrom returns the time left that a request's header propagates:
// TimeoutHeader's, or EnvoyTimeoutHeader's, the shorter when both are set.
// It reports false when neither is set and valid; an invalid value (or
// Envoy's 0) is ignored, so that a malformed header never makes a server
// refuse work.
func TimeoutFrom(h http.Header) (time.Duration, bool) {
	d, ok := time.Duration(0), false
	if v := h[TimeoutHeader]; len(v) > 0 {
		d, ok = ParseTimeout(v[0])
	}
	if v := h[EnvoyTimeoutHeader]; len(v) > 0 {
		// Zero is taken for no timeout: Envoy's routes use 0 to disable it.
		if ms, err := strconv.ParseInt(v[0], 10, 64); err == nil && ms > 0 {
			e := maxDuration
			if ms <= int64(maxDuration/time.Millisecond) {
				e = time.Duration(ms) * time.Millisecond
			}
			if !ok || e < d {
				d, ok = e, true
			}
		}
	}
	return d, ok
}
