package lab

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/retrystorm/retrystorm/scenario"
)

// Target is a real service the lab plays a scenario against (see
// ExperimentOptions.Target): every fleet's gateway sends its attempts to a
// FaultProxy on 127.0.0.1, which applies the scenario's triggers and
// forwards to the service. Fleets run one after the other, with a pause
// between them until the service's latency is back at its baseline.
type Target struct {
	// URL is the service: http or https, a host, and a path every
	// request goes under.
	URL *url.URL
	// Impose makes the service behave as the scenario's origin (see
	// ProxyConfig.Impose).
	Impose bool
	// Settle bounds the pause between fleets; zero means DefaultSettle.
	Settle time.Duration
	// Log is told how each pause went; nil says nothing.
	Log io.Writer
	// Transport reaches the service, for the proxy and the latency
	// probes; nil means an HTTP/1.1 transport of the lab's own.
	Transport http.RoundTripper

	baseline time.Duration // the latency at rest, measured before the first fleet
}

// DefaultSettle is the longest pause between two fleets against a target.
const DefaultSettle = 30 * time.Second

// ErrRemoteTarget is CheckTarget's error for a target outside this machine.
var ErrRemoteTarget = errors.New("the target is not on this machine")

// CheckTarget reports why the lab should not send a storm to u: it must
// be http or https with a host, and on loopback (127.0.0.0/8, ::1 or
// localhost) unless allowRemote. A host name other than localhost is
// remote: what it resolves to may change while the run goes on.
func CheckTarget(u *url.URL, allowRemote bool) error {
	if u == nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" {
		return fmt.Errorf("want an http:// or https:// URL with a host, got %q", u.Redacted())
	}
	if u.User != nil {
		return errors.New("the target URL carries a user name or password: put neither on a command line")
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return fmt.Errorf("port %q: want a port from 1 to 65535", p)
		}
	}
	if allowRemote {
		return nil
	}
	host := u.Hostname()
	if ip := net.ParseIP(host); (ip != nil && ip.IsLoopback()) || strings.EqualFold(host, "localhost") {
		return nil
	}
	return fmt.Errorf("%w: %s; a storm is a load test, and one sent to a shared service is an incident: give --allow-remote to send it anyway", ErrRemoteTarget, host)
}

// peakAttemptRate is the most attempts per second of wall time sc can
// send at a tick of tick: the highest of its fleets' ceilings (resil's
// Policy.Ceiling) at its highest intent rate (its rate series' and load
// triggers' included), scaled. It is +Inf for a
// fleet whose retries have no bound.
func peakAttemptRate(sc *scenario.Scenario, tick time.Duration) (float64, error) {
	rate := peakIntentRate(sc)
	peak := 0.0
	for _, f := range sc.Fleets {
		p, err := f.NewPolicy()
		if err != nil {
			return 0, err
		}
		peak = max(peak, p.Ceiling(rate))
	}
	return peak * sc.Tick.Seconds() / tick.Seconds(), nil
}

// peakIntentRate is the highest intent rate sc can ask for, per second of
// its time: its rate, the highest point of its rate series, and every load
// trigger's.
func peakIntentRate(sc *scenario.Scenario) float64 {
	rate := sc.Traffic.Rate
	if sr := sc.Traffic.Series; sr != nil {
		rate = max(rate, sr.Peak())
	}
	for _, t := range sc.Triggers {
		if t.Kind == scenario.TriggerLoad {
			rate = max(rate, t.Rate)
		}
	}
	return rate
}

// transport returns the transport that reaches the target.
func (t *Target) transport() (http.RoundTripper, func()) {
	if t.Transport != nil {
		return t.Transport, func() {}
	}
	tr := targetTransport()
	return tr, tr.CloseIdleConnections
}

func (t *Target) log(format string, args ...any) {
	if t.Log != nil {
		fmt.Fprintf(t.Log, format, args...)
	}
}

// Probes of the latency at rest: this many requests, one after the other,
// each given this long; the median counts.
const (
	restProbes   = 9
	probeTimeout = 5 * time.Second
)

// measureRest returns the median latency of n requests sent one after
// the other, how many of them failed (an error, or a 5xx), and why the
// last that failed did.
func measureRest(ctx context.Context, tr http.RoundTripper, u *url.URL, n int) (median time.Duration, failed int, why error, err error) {
	took := make([]time.Duration, 0, n)
	for range n {
		r, err := probeOnce(ctx, tr, u, probeTimeout)
		if err != nil {
			return 0, 0, nil, err
		}
		if r.fail != nil {
			failed, why = failed+1, r.fail
		}
		took = append(took, r.took)
	}
	slices.Sort(took)
	return took[len(took)/2], failed, why, nil
}

// probeReply is how one request of a probe went: how long it took and,
// when it failed (no answer, or a 5xx), why.
type probeReply struct {
	took time.Duration
	fail error
}

// probeOnce sends one GET to u and reports how it went; err is ctx's, when
// it ends first.
func probeOnce(ctx context.Context, tr http.RoundTripper, u *url.URL, timeout time.Duration) (probeReply, error) {
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return probeReply{fail: err}, nil
	}
	start := time.Now()
	resp, err := tr.RoundTrip(req)
	if err != nil {
		if ctx.Err() != nil {
			return probeReply{}, ctx.Err()
		}
		return probeReply{took: time.Since(start), fail: err}, nil
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, proxyMaxBody))
	_ = resp.Body.Close()
	r := probeReply{took: time.Since(start)}
	if resp.StatusCode >= 500 {
		r.fail = fmt.Errorf("it answered %s", resp.Status)
	}
	return r, nil
}

// TargetError is a target the lab cannot play against: it does not
// answer, or answers with errors or garbage, at rest. The command line
// makes it a usage error (exit 2): the input is wrong, not the claims.
type TargetError struct {
	URL            string
	Failed, Probes int
	Err            error // the last failure's cause
}

func (e *TargetError) Error() string {
	return fmt.Sprintf("the target %s fails %d of %d requests at rest (the last: %v): start it, fix it, or point the lab elsewhere", e.URL, e.Failed, e.Probes, e.Err)
}

func (e *TargetError) Unwrap() error { return e.Err }

// rest measures the target's latency at rest, before the first fleet, and
// refuses a target that does not answer.
func (t *Target) rest(ctx context.Context) error {
	if t.baseline > 0 {
		return nil
	}
	tr, done := t.transport()
	defer done()
	d, failed, why, err := measureRest(ctx, tr, t.URL, restProbes)
	if err != nil {
		return err
	}
	if failed > restProbes/2 {
		return &TargetError{URL: t.URL.Redacted(), Failed: failed, Probes: restProbes, Err: why}
	}
	t.baseline = max(d, time.Microsecond)
	t.log("lab: the target %s answers in %s at rest (median of %d)\n", t.URL.Redacted(), d.Round(10*time.Microsecond), restProbes)
	return nil
}

// settled reports whether a latency is back at the baseline: within half
// of it, or 2 ms, whichever is more (a loopback hop varies by that much).
func (t *Target) settled(d time.Duration) bool {
	return d <= max(t.baseline*3/2, t.baseline+2*time.Millisecond)
}

// pause waits, before the next fleet, until the target's latency is back
// at its baseline and it fails nothing, or Settle has passed, and says
// which on the log. It returns how long it waited.
func (t *Target) pause(ctx context.Context, next string) (time.Duration, error) {
	bound := t.Settle
	if bound <= 0 {
		bound = DefaultSettle
	}
	tr, done := t.transport()
	defer done()
	start := time.Now()
	t.log("lab: before %s, waiting for the target to settle (latency back at its baseline %s, at most %s)\n", next, t.baseline.Round(10*time.Microsecond), Short(bound))
	var last time.Duration
	for {
		d, failed, _, err := measureRest(ctx, tr, t.URL, 5)
		if err != nil {
			return time.Since(start), err
		}
		last = d
		if failed == 0 && t.settled(d) {
			took := time.Since(start)
			t.log("lab: the target settled in %s (median %s)\n", took.Round(time.Millisecond), d.Round(10*time.Microsecond))
			return took, nil
		}
		if time.Since(start) >= bound {
			break
		}
		select {
		case <-ctx.Done():
			return time.Since(start), ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	took := time.Since(start)
	t.log("lab: the target did not settle in %s (median %s against %s at rest): %s starts anyway, and may inherit the last fleet's backlog\n",
		Short(bound), last.Round(10*time.Microsecond), t.baseline.Round(10*time.Microsecond), next)
	return took, nil
}

// describe says what the lab plays against, for the report.
func (t *Target) describe() string {
	s := fmt.Sprintf("the service at %s, through a fault proxy on 127.0.0.1 that applies the triggers", t.URL.Redacted())
	if t.Impose {
		s += " and imposes the scenario's origin"
	}
	return s
}

// wallCutoff is when a fleet's load stops against a target: at the end of
// the scenario, plus one attempt's timeout for the last answers.
func wallCutoff(wall *scenario.Scenario, i int) time.Duration {
	return wall.Duration + wall.Fleets[i].Timeout
}
