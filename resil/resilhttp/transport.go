// Package resilhttp guards HTTP clients and servers with resil. For
// clients, an http.RoundTripper that sends every request under a
// [resil.Guard], so that retries are paid from its budget, pass its breaker
// and its adaptive throttle, wait out its backoff or the server's
// Retry-After, and hedge slow requests. For servers, [Shed], middleware
// that drives a [admission.Shedder]: it refuses at once, with a 503, work whose
// caller's deadline has passed or is too near, and work over an adaptive
// concurrency limit.
//
// Both ends speak the deadline in one header, [TimeoutHeader], which is why
// they live in one package: the Transport sends the time its caller has
// left on every attempt, and Shed reads it.
//
// What HTTP adds to the Guard:
//
//   - A request is retried or hedged when it carries an idempotency key,
//     or when both its method and its Guard say it may run twice: the
//     method is idempotent by RFC 9110 (GET, HEAD, OPTIONS, TRACE, PUT,
//     DELETE) and the Guard's GuardSettings.Idempotency is
//     resil.Idempotent. That is resil's one rule (a call's own idempotency
//     when it says, else the Guard's), with the method saying only "not
//     idempotent": a Guard set to resil.NotIdempotent retries no request
//     without a key, a GET included. With Keys set, POST and PATCH
//     requests get an Idempotency-Key header, the same on every attempt
//     of one call, and may then be retried: the server deduplicates by it.
//   - A request body is replayed with Request.GetBody (http.NewRequest sets
//     it for the usual body types). A request whose body cannot be replayed
//     is sent once.
//   - Statuses 429, 502, 503 and 504 are retried by default (RetryStatus);
//     Retry-After, in seconds or as an HTTP date, replaces the backoff
//     and is honoured as the server asks, up to Policy.MaxPushback (zero:
//     resil.DefaultMaxPushback, a minute; not the backoff's cap), and is
//     still paid from the budget.
//   - What is retried is what counts as a failure, for the breaker and the
//     budget: by default a status the Transport does not retry (a 500, a
//     501) is an answer that says nothing about the server's health, as
//     gRFC A6's retry throttle counts the codes it does not retry, and
//     does not open the breaker (FailureStatus says otherwise).
//   - Timeouts (net.Error.Timeout, deadlines) count as resil.OutcomeTimeout, other
//     connection errors as resil.OutcomeFailure, so a budget's TimeoutCost applies.
//   - Every attempt carries the time its caller has left in TimeoutHeader
//     (unless OmitTimeout), so that the server can shed it in time.
//   - Response bodies of discarded attempts are drained and closed. When
//     the retries stop on a retryable status, the last response is returned
//     with a nil error, as any RoundTripper returns an HTTP error status;
//     StopOf says why they stopped.
//   - Base sees each attempt's resil.Attempt (its number, and whether it is
//     a first attempt, a retry or a hedge) on the request's context:
//     AttemptOf. With AttemptHeader set, the server hears its kind too.
//
// For a service with several replicas, [Replicas] is the Transport's Base:
// it sends each attempt to the replica a resil/balance picker chooses and
// tells a resil/outlier detector how it ended, so that a retry may go to
// another replica and a failing one is ejected.
package resilhttp

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/retrystorm/retrystorm/resil"
)

// DefaultKeyHeader is the header that carries the idempotency key.
const DefaultKeyHeader = "Idempotency-Key"

// Transport is an http.RoundTripper that sends each request under Guard.
//
// The zero value is not usable: Guard is required (RoundTrip returns an
// error without it). A Transport is safe for concurrent use; it must not be
// changed once in use.
type Transport struct {
	// Guard decides retries, hedges and refusals. Required. Its
	// GuardSettings.Idempotency applies to the requests whose method is
	// idempotent by RFC 9110: resil.Idempotent retries them,
	// resil.NotIdempotent only those that carry a key. Other methods (POST,
	// PATCH, CONNECT) are retried only with a key, whatever the Guard says.
	Guard *resil.Guard
	// Base sends each attempt. Nil means http.DefaultTransport. A
	// Replicas spreads the attempts over several replicas.
	Base http.RoundTripper
	// RetryStatus reports whether a response status is worth a retry.
	// Nil means DefaultRetryStatus: 429, 502, 503, 504.
	RetryStatus func(code int) bool
	// FailureStatus reports whether a status the Transport does not retry
	// still counts as a failure of the server, for the breaker and the
	// budget. Nil means none: a status RetryStatus does not retry is not a
	// failure. A 5xx that is not retried (500, 501, 505, ...) then counts
	// as neither success nor failure (resil.Neutral), other statuses as
	// answers. Set it to ServerError to count every 5xx, and choose a
	// failure-rate breaker then: a consecutive-failure breaker opens on a
	// server that fails a share of its requests with 500, shedding the
	// answers it gives to the rest.
	FailureStatus func(code int) bool
	// Keys adds an idempotency key to POST and PATCH requests that have
	// none, so that they may be retried. A request that already carries
	// the header keeps its key, and is retried whatever Keys says.
	Keys bool
	// KeyHeader names the key's header. Empty means DefaultKeyHeader.
	KeyHeader string
	// OmitTimeout stops the Transport from telling the server how long
	// the caller waits. By default every attempt whose context has a
	// deadline (the caller's, or GuardSettings.AttemptTimeout's) carries
	// the time left in TimeoutHeader, or the time the request already
	// carried there when that is shorter, so that a server can refuse
	// work that cannot finish in time (see Shed).
	OmitTimeout bool
	// AttemptHeader, if set, names a header that tells the server why each
	// attempt was sent, in resil.Kind's words: "first", "retry" or
	// "hedge". A server can then count the load that retries and hedges
	// add to what its callers asked for. Empty means none is sent.
	AttemptHeader string
}

// DefaultRetryStatus reports whether code is 429 Too Many Requests, 502 Bad
// Gateway, 503 Service Unavailable or 504 Gateway Timeout: the statuses
// that say the request may succeed if sent again.
func DefaultRetryStatus(code int) bool {
	switch code {
	case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	}
	return false
}

// ServerError reports whether code is a 5xx: the server failed. As
// Transport.FailureStatus, it counts the 5xx statuses that are not
// retried as failures too.
func ServerError(code int) bool { return code >= 500 && code <= 599 }

// StatusError is the error of an attempt that got a retryable (or failed)
// status. The response itself is returned by RoundTrip, not carried here.
// It implements resil.Pushback with the Retry-After the response carried.
// The zero value is a status 0 without Retry-After; a StatusError is not
// changed once made, so it may be shared between goroutines.
type StatusError struct {
	// Code is the response's status code.
	Code int
	// Wait is the Retry-After delay, zero when absent or in the past.
	Wait time.Duration
}

// Error returns "resilhttp: status 503 Service Unavailable".
func (e *StatusError) Error() string {
	return "resilhttp: status " + strconv.Itoa(e.Code) + " " + http.StatusText(e.Code)
}

// RetryAfter returns Wait, for resil's pushback.
func (e *StatusError) RetryAfter() time.Duration { return e.Wait }

var errNoGuard = errors.New("resilhttp: Transport.Guard is nil")

// Idempotent reports whether method is idempotent by RFC 9110 section
// 9.2.2 (the empty method is GET).
func Idempotent(method string) bool {
	switch method {
	case "", http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace, http.MethodPut, http.MethodDelete:
		return true
	}
	return false
}

// RoundTrip sends req under the Guard. It returns the first response that
// is not retried, or the last one when the retries stop (StopOf says why);
// an error when no response came (a call the breaker refused wraps
// resil.ErrBreakerOpen, one the adaptive throttle refused
// resil.ErrThrottled, a stopped one is a *resil.StopError). Each attempt's
// request carries its resil.Attempt on its context, for Base to read with
// AttemptOf.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if t.Guard == nil {
		closeBody(req)
		return nil, errNoGuard
	}
	c := t.newCall(req)
	resp, err := resil.CallWith(req.Context(), t.Guard, c.options(), c.send)
	c.settleBody()
	if resp != nil {
		return withStop(resp, req, err), nil // the answer, or the last one when retries stopped
	}
	return nil, err
}

// call is one RoundTrip: the request, the settings it runs under, and who
// sent its body.
type call struct {
	t             *Transport
	req           *http.Request
	hdr           string // the key's header
	base          http.RoundTripper
	retry, failed func(code int) bool
	hasBody       bool
	bodyUsed      sync.Once // taken by the first attempt, or by settleBody
	usedOriginal  bool      // the first attempt sent req.Body itself
}

// newCall fills in the Transport's defaults for req.
func (t *Transport) newCall(req *http.Request) *call {
	c := &call{t: t, req: req, hdr: t.KeyHeader, base: t.Base, retry: t.RetryStatus, failed: t.FailureStatus,
		hasBody: req.Body != nil && req.Body != http.NoBody}
	if c.hdr == "" {
		c.hdr = DefaultKeyHeader
	}
	if c.base == nil {
		c.base = http.DefaultTransport
	}
	if c.retry == nil {
		c.retry = DefaultRetryStatus
	}
	return c
}

// options says what the Guard may repeat: a request with a key (or one
// Keys gives it), a request whose method is idempotent when the Guard says
// its calls are, and never a body that cannot be sent again.
func (c *call) options() resil.CallOptions[*http.Response] {
	o := resil.CallOptions[*http.Response]{
		Key:     c.req.Header.Get(c.hdr),
		Discard: discard,
		Keep:    keep,
	}
	// An idempotent method says nothing, so the Guard's Idempotency
	// decides (resil's rule); any other method says the call may not run
	// twice, whatever the Guard says.
	m := c.req.Method
	if !Idempotent(m) {
		o.Idempotency = resil.NotIdempotent
		if o.Key == "" && c.t.Keys && (m == http.MethodPost || m == http.MethodPatch) {
			o.NewKey = true
		}
	}
	if c.hasBody && c.req.GetBody == nil {
		o.Once = true // the body can be sent once only
	}
	return o
}

// send is one attempt: its request, sent by Base, and the answer judged.
func (c *call) send(ctx context.Context, a resil.Attempt) (*http.Response, error) {
	r, err := c.attemptRequest(ctx, a)
	if err != nil {
		return nil, err
	}
	resp, err := c.base.RoundTrip(r)
	if err != nil {
		return nil, classify(err)
	}
	return resp, c.judge(resp)
}

// attemptRequest is req for attempt a: on the attempt's context, which
// carries a, with a body of its own (the original goes with the first
// attempt, a copy from GetBody with every later one) and the key.
func (c *call) attemptRequest(ctx context.Context, a resil.Attempt) (*http.Request, error) {
	r := c.req.WithContext(&attemptContext{Context: ctx, a: a})
	if c.hasBody {
		first := false
		if a.Number == 1 {
			c.bodyUsed.Do(func() { first, c.usedOriginal = true, true })
		}
		if !first {
			body, err := c.req.GetBody()
			if err != nil {
				return nil, resil.Permanent(err)
			}
			r.Body = body
		}
	}
	// What the attempt adds to the caller's header: the key, the time left
	// (unless the request carries less) and the attempt's kind.
	var add [3]struct{ name, value string }
	n := 0
	if a.Key != "" && c.req.Header.Get(c.hdr) != a.Key {
		add[n].name, add[n].value = c.hdr, a.Key
		n++
	}
	if dl, ok := ctx.Deadline(); ok && !c.t.OmitTimeout {
		left := dl.Sub(c.t.Guard.Now())
		if d, ok := ParseTimeout(headerValue(c.req.Header, TimeoutHeader)); !ok || left < d {
			add[n].name, add[n].value = TimeoutHeader, FormatTimeout(left)
			n++
		}
	}
	if c.t.AttemptHeader != "" {
		add[n].name, add[n].value = c.t.AttemptHeader, a.Kind.String()
		n++
	}
	if n > 0 {
		// The request's header is the caller's and every attempt's: the
		// attempt gets a copy, with room for what it adds, in one go.
		var room []string
		r.Header, room = cloneHeader(c.req.Header, n)
		for i, f := range add[:n] {
			room[i] = f.value
			if f.name != TimeoutHeader { // canonical already
				f.name = http.CanonicalHeaderKey(f.name)
			}
			r.Header[f.name] = room[i : i+1 : i+1]
		}
	}
	return r, nil
}

// cloneHeader returns a deep copy of h with room for extra more fields:
// one map and one array for every value, the room included (the last
// extra strings of the array, returned apart), where h.Clone then Set
// would allocate a slice per field set and might grow the map.
func cloneHeader(h http.Header, extra int) (http.Header, []string) {
	n := extra
	for _, v := range h {
		n += len(v)
	}
	vals := make([]string, n)
	out := make(http.Header, len(h)+extra)
	for k, v := range h {
		if v == nil {
			out[k] = nil // kept nil, as Clone does: ReverseProxy so marks a field it must not add
			continue
		}
		m := copy(vals, v)
		out[k] = vals[:m:m] // full: an Add reallocates, never writes past
		vals = vals[m:]
	}
	return out, vals
}

// judge is the error a response stands for: a *StatusError for a status
// worth a retry (with its Retry-After), a permanent one for a failure not
// worth one, a neutral one for a 5xx that is neither, nil for an answer.
func (c *call) judge(resp *http.Response) error {
	code := resp.StatusCode
	switch {
	case c.retry(code):
		return &StatusError{Code: code, Wait: retryAfter(resp.Header.Get("Retry-After"), c.t.Guard.Now())}
	case c.failed != nil && c.failed(code):
		return resil.Permanent(&StatusError{Code: code})
	case ServerError(code):
		// Not a success either: it must not fund a budget, reset a
		// consecutive-failure count or close a half-open breaker.
		return resil.Neutral(&StatusError{Code: code})
	}
	return nil
}

// settleBody closes the request's body when no attempt sent it, as
// RoundTrip must, and keeps any attempt from taking it from here on.
func (c *call) settleBody() {
	if c.hasBody {
		c.bodyUsed.Do(func() {})
		if !c.usedOriginal {
			closeBody(c.req)
		}
	}
}

type attemptKey struct{}

// attemptContext is an attempt's context: ctx carrying the attempt, in
// one allocation where context.WithValue would take two (the context, and
// the Attempt boxed in an interface). Its Value answers with a pointer into
// itself, which boxes nothing.
type attemptContext struct {
	context.Context
	a resil.Attempt
}

func (c *attemptContext) Value(key any) any {
	if key == (attemptKey{}) {
		return &c.a
	}
	return c.Context.Value(key)
}

// AttemptOf returns the attempt a request is sent as, from the context of
// the request a Transport hands its Base: its number, its kind (first,
// retry or hedge) and its idempotency key. ok is false for a context no
// Transport made.
func AttemptOf(ctx context.Context) (a resil.Attempt, ok bool) {
	if p, ok := ctx.Value(attemptKey{}).(*resil.Attempt); ok {
		return *p, true
	}
	return a, false
}

// headerValue is h.Get(key) for a key already canonical: a map lookup,
// without canonicalizing the key again.
func headerValue(h http.Header, key string) string {
	if v := h[key]; len(v) > 0 {
		return v[0]
	}
	return ""
}

type stopKey struct{}

// withStop records on resp, when err is the *resil.StopError the call
// stopped with, that error, for StopOf. resp.Request becomes a copy of
// itself (or of req, when Base set none) whose context carries it.
func withStop(resp *http.Response, req *http.Request, err error) *http.Response {
	se, ok := errors.AsType[*resil.StopError](err)
	if !ok {
		return resp
	}
	r := resp.Request
	if r == nil {
		r = req
	}
	resp.Request = r.WithContext(context.WithValue(r.Context(), stopKey{}, se))
	return resp
}

// StopOf returns why the Transport stopped on resp: the *resil.StopError of
// a call whose retries ended on a retryable or failed status, which
// RoundTrip returns with the response and a nil error (as a RoundTripper
// must). resil.ReasonOf names the reason (resil.StopNotRetryable for a
// 5xx that is not retried). It is nil for a response the Transport did not
// stop on: an answer, a 404 as much as a 200.
func StopOf(resp *http.Response) *resil.StopError {
	if resp == nil || resp.Request == nil {
		return nil
	}
	se, _ := resp.Request.Context().Value(stopKey{}).(*resil.StopError)
	return se
}

// classify marks the errors that no retry can fix.
func classify(err error) error {
	if _, ok := errors.AsType[*tls.CertificateVerificationError](err); ok {
		return resil.Permanent(err)
	}
	if _, ok := errors.AsType[x509.UnknownAuthorityError](err); ok {
		return resil.Permanent(err)
	}
	if _, ok := errors.AsType[x509.HostnameError](err); ok {
		return resil.Permanent(err)
	}
	if _, ok := errors.AsType[x509.CertificateInvalidError](err); ok {
		return resil.Permanent(err)
	}
	return err
}

// retryAfter parses a Retry-After value: delay-seconds or an HTTP date,
// measured from now. Absent, malformed or past: zero.
func retryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if v[0] >= '0' && v[0] <= '9' {
		// A wait too long for int64 is as long as a wait can be: clamp it
		// like any other long one (the policy clamps it further), rather
		// than ignore it.
		const longest = 100 * 365 * 24 * time.Hour
		n, err := strconv.ParseInt(v, 10, 64)
		if ne, ok := errors.AsType[*strconv.NumError](err); ok && ne.Err == strconv.ErrRange {
			return longest
		}
		if err != nil || n < 0 {
			return 0
		}
		return min(time.Duration(n), longest/time.Second) * time.Second
	}
	when, err := http.ParseTime(v)
	if err != nil {
		return 0
	}
	return max(0, when.Sub(now))
}

// drainLimit is how much of a discarded response body is read so that its
// connection can be reused; beyond that, closing is cheaper.
const drainLimit = 64 << 10

// discard drains and closes the body of a response nobody will read.
func discard(resp *http.Response) {
	if resp == nil || resp.Body == nil {
		return
	}
	_, _ = io.CopyN(io.Discard, resp.Body, drainLimit)
	_ = resp.Body.Close()
}

// keep ties the attempt's context to the response body: the body is read
// under that context, so it is released when the body is closed.
func keep(resp *http.Response, release func()) *http.Response {
	if resp == nil || resp.Body == nil {
		release()
		return resp
	}
	resp.Body = &heldBody{ReadCloser: resp.Body, release: release}
	return resp
}

type heldBody struct {
	io.ReadCloser
	once    sync.Once
	release func()
}

func (b *heldBody) Close() error {
	err := b.ReadCloser.Close()
	b.once.Do(b.release)
	return err
}

func closeBody(req *http.Request) {
	if req.Body != nil {
		_ = req.Body.Close()
	}
}
