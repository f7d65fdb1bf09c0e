package resilhttp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/retrystorm/retrystorm/resil"
	"github.com/retrystorm/retrystorm/resil/balance"
	"github.com/retrystorm/retrystorm/resil/outlier"
)

// ReplicaSettings configures [Replicas]. The zero value is invalid:
// Endpoints and Picker are required.
type ReplicaSettings struct {
	// Endpoints are the replicas, as base URLs: a scheme (http or https)
	// and a host[:port], nothing else ("http://127.0.0.1:8081"). Host i of
	// Picker and Detector is Endpoints[i]. Required: 1 to 1,000,000.
	Endpoints []string
	// Picker chooses the endpoint of each attempt, as resil/balance's
	// pickers do. Required. Build it for len(Endpoints) hosts and with
	// Detector as its balance.Settings.Detector: the picker is what skips
	// the hosts the detector ejects (and applies the panic threshold).
	Picker balance.Picker
	// Detector, if set, hears how every attempt ended and ejects the
	// outliers. It must watch len(Endpoints) hosts. Nil means no outlier
	// detection: the Picker alone chooses.
	Detector *outlier.Detector
	// Base sends each attempt to its endpoint. Nil means
	// http.DefaultTransport.
	Base http.RoundTripper
	// Clock tells the time of each pick, answer and evaluation. Nil means
	// resil.RealClock(). Give it the Guard's clock.
	Clock resil.Clock
}

// Replicas is an http.RoundTripper that sends each request to one of
// several replicas of a service: the Picker chooses the endpoint, and the
// Detector hears how the request ended. As the Base of a [Transport], it
// sends every attempt of a call through its own pick, so that a retry or a
// hedge may go to another replica, and a replica the Detector ejected gets
// no more attempts until it is back:
//
//	det, _ := outlier.New(outlier.EnvoyDefaults(3))
//	p2c, _ := balance.NewP2C(balance.Settings{Hosts: 3, Detector: det})
//	reps, _ := resilhttp.NewReplicas(resilhttp.ReplicaSettings{Endpoints: urls, Picker: p2c, Detector: det})
//	client := &http.Client{Transport: &resilhttp.Transport{Guard: g, Base: reps}}
//
// The request's URL gets the endpoint's scheme and host, its path and query
// unchanged; its Host header stays the caller's (the URL's host when the
// caller set none), as Envoy forwards the downstream authority by default.
//
// What each attempt tells the Detector: the status of its response
// (outlier.FromHTTPStatus: 502, 503 and 504 are gateway errors, another 5xx
// a 5xx, the rest successes); no response at all is a local-origin failure;
// an attempt whose context was cancelled (the caller left, or a hedge won)
// tells nothing, as Envoy does not count a downstream reset. An attempt
// counts in flight for the Picker from its pick until its response body is
// closed (or until its error), and its latency, for balance.PeakEWMA, is
// the time to the response's header.
//
// The Detector's interval evaluations run lazily: the first request after
// an interval has ended runs them (outlier.Detector.Advance), each at its
// own time, so Replicas keeps no timer and no goroutine, and an idle client
// costs nothing. A host therefore comes back at the first request after its
// ejection ends, rather than on Envoy's timer: it takes no traffic in
// between either way.
//
// Not modelled: Envoy's retry host predicates (previous_hosts): a retry is
// picked as any attempt is, so with P2C or Random it may land on the host
// that just failed, unless that host is ejected; RoundRobin moves on.
//
// Make one with [NewReplicas]. The zero Replicas fails closed: RoundTrip
// returns an error wrapping resil.ErrNotBuilt. A Replicas is safe for
// concurrent use.
type Replicas struct {
	eps   []*url.URL
	pick  balance.Picker
	det   *outlier.Detector
	base  http.RoundTripper
	clock resil.Clock
	every time.Duration
	due   atomic.Int64 // unix nanoseconds of the next Advance; 0 before the first
}

func badReplica(field string, value any, reason string) error {
	return &resil.SettingError{Field: "resilhttp.ReplicaSettings." + field, Value: value, Reason: reason}
}

// NewReplicas returns a Replicas for s, or a *resil.SettingError naming the
// first invalid field.
func NewReplicas(s ReplicaSettings) (*Replicas, error) {
	if len(s.Endpoints) < 1 || len(s.Endpoints) > 1_000_000 {
		return nil, badReplica("Endpoints", len(s.Endpoints), "must list 1 to 1,000,000 base URLs")
	}
	if s.Picker == nil {
		return nil, badReplica("Picker", nil, "required: a resil/balance picker for len(Endpoints) hosts")
	}
	if s.Detector != nil && s.Detector.Hosts() != len(s.Endpoints) {
		return nil, badReplica("Detector", s.Detector.Hosts(), "must watch len(Endpoints) hosts (a zero Detector watches none)")
	}
	r := &Replicas{eps: make([]*url.URL, len(s.Endpoints)), pick: s.Picker, det: s.Detector, base: s.Base, clock: s.Clock}
	for i, e := range s.Endpoints {
		u, err := url.Parse(e)
		switch {
		case err != nil:
			return nil, badReplica("Endpoints["+strconv.Itoa(i)+"]", e, err.Error())
		case u.Scheme != "http" && u.Scheme != "https", u.Host == "", u.Opaque != "", u.User != nil,
			u.Path != "" && u.Path != "/", u.RawQuery != "", u.Fragment != "":
			return nil, badReplica("Endpoints["+strconv.Itoa(i)+"]", e, `must be a base URL: "http://host:port" or "https://host:port"`)
		}
		r.eps[i] = u
	}
	if r.base == nil {
		r.base = http.DefaultTransport
	}
	if r.clock == nil {
		r.clock = resil.RealClock()
	}
	if r.det != nil {
		r.every = r.det.Settings().Interval
	}
	return r, nil
}

var errReplicasNotBuilt = fmt.Errorf("resilhttp: Replicas: %w", resil.ErrNotBuilt)

// RoundTrip picks an endpoint for req and sends req there with Base.
func (r *Replicas) RoundTrip(req *http.Request) (*http.Response, error) {
	if r == nil || r.pick == nil {
		closeBody(req)
		return nil, errReplicasNotBuilt
	}
	now := r.clock.Now()
	r.advance(now)
	i, err := r.pick.Pick(now)
	if err != nil {
		closeBody(req)
		return nil, fmt.Errorf("resilhttp: no replica to send to: %w", err)
	}
	if uint(i) >= uint(len(r.eps)) {
		r.pick.Done(now, i, 0, resil.OutcomeIgnored)
		closeBody(req)
		// A picker built for another number of hosts: no retry mends that.
		return nil, resil.Permanent(fmt.Errorf("resilhttp: the picker chose host %d of %d endpoints", i, len(r.eps)))
	}
	out := req.WithContext(req.Context()) // a shallow copy: the caller's request is not changed
	u := *req.URL
	u.Scheme, u.Host = r.eps[i].Scheme, r.eps[i].Host
	out.URL = &u
	if out.Host == "" {
		out.Host = req.URL.Host
	}
	resp, err := r.base.RoundTrip(out)
	end := r.clock.Now()
	lat := end.Sub(now)
	if err != nil {
		o, res, counts := r.judgeError(req.Context(), err)
		if counts && r.det != nil {
			_ = r.det.Record(end, i, res)
		}
		r.pick.Done(end, i, lat, o)
		return nil, err
	}
	res := outlier.FromHTTPStatus(resp.StatusCode)
	if r.det != nil {
		_ = r.det.Record(end, i, res)
	}
	o := resil.OutcomeSuccess
	if res != outlier.Success {
		o = resil.OutcomeFailure
	}
	// The attempt stays in flight until its body is done with: that is
	// when the replica's work for it ends, for the least-request pickers.
	rel := &replicaRelease{r: r, host: i, lat: lat, o: o}
	if resp.Body == nil {
		rel.release()
	} else {
		resp.Body = &replicaBody{ReadCloser: resp.Body, rel: rel}
	}
	return resp, nil
}

// judgeError is what an attempt that got no response tells the picker and
// the detector: a cancelled one nothing (the caller left or a hedge won),
// a timed-out or failed one a local-origin failure.
func (r *Replicas) judgeError(ctx context.Context, err error) (o resil.Outcome, res outlier.Result, counts bool) {
	if errors.Is(ctx.Err(), context.Canceled) || errors.Is(err, context.Canceled) {
		return resil.OutcomeIgnored, outlier.Success, false
	}
	if errors.Is(err, context.DeadlineExceeded) || isTimeout(err) {
		return resil.OutcomeTimeout, outlier.LocalFailure, true
	}
	return resil.OutcomeFailure, outlier.LocalFailure, true
}

func isTimeout(err error) bool {
	var t interface{ Timeout() bool }
	return errors.As(err, &t) && t.Timeout()
}

// advance runs the Detector's evaluations due by now, at most once per
// interval from the requests' side: one atomic load on most requests.
func (r *Replicas) advance(now time.Time) {
	if r.det == nil {
		return
	}
	n := now.UnixNano()
	due := r.due.Load()
	if due != 0 && n < due {
		return
	}
	if !r.due.CompareAndSwap(due, n+int64(r.every)) {
		return // another request runs it
	}
	_ = r.det.Advance(now)
}

// Endpoint returns endpoint i as NewReplicas read it, or nil for an i out
// of range.
func (r *Replicas) Endpoint(i int) *url.URL {
	if r == nil || uint(i) >= uint(len(r.eps)) {
		return nil
	}
	u := *r.eps[i]
	return &u
}

// replicaRelease tells the picker, once, that an attempt is done.
type replicaRelease struct {
	r    *Replicas
	host int
	lat  time.Duration
	o    resil.Outcome
	once sync.Once
}

func (x *replicaRelease) release() {
	x.once.Do(func() { x.r.pick.Done(x.r.clock.Now(), x.host, x.lat, x.o) })
}

type replicaBody struct {
	io.ReadCloser
	rel *replicaRelease
}

func (b *replicaBody) Close() error {
	err := b.ReadCloser.Close()
	b.rel.release()
	return err
}
