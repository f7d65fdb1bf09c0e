package resilhttp

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/retrystorm/retrystorm/resil/admission"
)

// Shed returns HTTP server middleware that admits each request through s
// before the handler runs:
//
//   - It reads the caller's deadline from TimeoutHeader (or Envoy's
//     EnvoyTimeoutHeader), measured from the moment the request reaches the
//     middleware.
//   - It refuses, before any work, a request whose deadline has passed or is
//     too near for its service time, or that is over the concurrency limit
//     and cannot wait for a slot; a request that waits is dropped as soon as
//     its caller disconnects, its deadline gets too near, or it has waited
//     its time. A refusal is immediate: 503 Service Unavailable, with
//     ShedHeader saying why and, for overload (limit, queue), Retry-After
//     when ShedderSettings.RetryAfter is set (in whole seconds, rounded up).
//   - It runs the handler under a context whose deadline is the caller's,
//     less DeadlineSettings.Reserve, so that the handler and whatever it
//     calls (through a resilhttp.Transport, which propagates it further) stop
//     when nobody waits any more.
//   - It tells s how the request ended: dropped when its deadline passed
//     while the handler ran, ignored when its caller went away before that,
//     else its duration is a latency sample for the limit.
//
// Every decision is s's: a gRPC interceptor over the same Shedder makes the
// same ones. An admitted request without a deadline header costs no
// allocation; with one, the handler's context and request copy cost what
// context.WithDeadline and Request.WithContext cost. The handler's
// deadline runs on the wall clock: serve HTTP with a Shedder on the real
// clock (ShedderSettings.Clock nil). A nil s refuses every request, as the
// zero Shedder does.
func Shed(s *admission.Shedder) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler { return &shedHandler{s: s, next: next} }
}

type shedHandler struct {
	s    *admission.Shedder
	next http.Handler
}

func (h *shedHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var deadline time.Time
	if d, ok := TimeoutFrom(r.Header); ok {
		deadline = h.s.Now().Add(d)
	}
	t, err := h.s.Admit(r.Context(), deadline)
	if err != nil {
		refuse(w, err)
		return
	}
	ctx := r.Context()
	if dl := h.s.Deadline().Deadline(deadline); !dl.IsZero() {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, dl)
		defer cancel()
		r = r.WithContext(ctx)
	}
	ended := false
	defer func() {
		if !ended { // the handler panicked (http.ErrAbortHandler, say): free the slot
			h.s.Ignore(t)
		}
	}()
	h.next.ServeHTTP(w, r)
	ended = true
	// A deadline that passed while the handler ran is a drop, even when
	// the client's hang-up cancelled the context first.
	switch dl, ok := ctx.Deadline(); {
	case ctx.Err() == nil:
		h.s.Done(t, false)
	case ok && !h.s.Now().Before(dl):
		h.s.Done(t, true)
	default:
		h.s.Ignore(t)
	}
}

// shedBodies are the refusals' bodies, made once.
var shedBodies = func() (b [admission.NumShedReasons]string) {
	for r := range b {
		b[r] = "resil: request shed: " + admission.ShedReason(r).String() + "\n"
	}
	return b
}()

// refuse answers a shed request: 503, why, and when to come back.
func refuse(w http.ResponseWriter, err error) {
	reason, wait := admission.ShedLimit, time.Duration(0)
	if se, ok := errors.AsType[*admission.ShedError](err); ok {
		reason, wait = se.Reason, se.Wait
	}
	if reason >= admission.NumShedReasons {
		reason = admission.ShedLimit
	}
	hd := w.Header()
	hd[ShedHeader] = []string{reason.String()}
	if wait > 0 {
		hd["Retry-After"] = []string{retryAfterSeconds(wait)}
	}
	hd["Content-Type"] = []string{"text/plain; charset=utf-8"}
	hd["X-Content-Type-Options"] = []string{"nosniff"}
	w.WriteHeader(http.StatusServiceUnavailable)
	_, _ = io.WriteString(w, shedBodies[reason])
}

// retryAfterSeconds formats a wait as Retry-After's delay-seconds, rounded
// up: at least 1.
func retryAfterSeconds(d time.Duration) string {
	s := int64(d / time.Second)
	if d%time.Second != 0 {
		s++
	}
	return strconv.FormatInt(max(s, 1), 10)
}
