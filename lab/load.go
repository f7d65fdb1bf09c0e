package lab

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/retrystorm/retrystorm/grid"
	"github.com/retrystorm/retrystorm/resil"
	"github.com/retrystorm/retrystorm/resil/resilhttp"
	"github.com/retrystorm/retrystorm/scenario"
)

// LoadConfig configures an open-loop load generator. Rates and durations
// are wall-clock ones: give it a scaled scenario's (see Scale). The zero
// value is not usable: Target and a rate are required.
type LoadConfig struct {
	// Target is the gateway's URL.
	Target *url.URL
	// Traffic is the intent stream: rate per second, constant or Poisson
	// arrivals, the clients the intents are spread over (round robin),
	// the share that is idempotent (GET; the others are POSTs) and the
	// share of POSTs that carry an idempotency key.
	Traffic scenario.Traffic
	// Triggers may change the rate (load triggers); others are ignored.
	Triggers []scenario.Trigger
	// Tick is the scenario's tick: a rate series (Traffic.Series) sets
	// the rate of each tick from its start. Required with a series.
	Tick time.Duration
	// Start is when the first intent is due; zero means now.
	Start time.Time
	// Duration is how long intents keep coming.
	Duration time.Duration
	// Deadline is how long each intent waits for its answer before giving
	// up. Required: it bounds every intent, so the run ends.
	Deadline time.Duration
	// ClearAt is when the triggers end, from Start: an intent due then or
	// later that sees a failure is a victim. Negative: no trigger.
	ClearAt time.Duration
	// Seed seeds Poisson arrivals and who is idempotent.
	Seed uint64
	// Tally, if set, receives intents per tick and their outcomes.
	Tally *Tally
	// MaxInFlight bounds the intents waiting at once; an intent due when
	// the bound is reached is not sent, and counted as shed (the report
	// says so: nothing is omitted silently). Zero means 1<<16.
	MaxInFlight int
	// Protocol is how the intents are sent: over HTTP (the default), or
	// over gRPC as calls of grpc.testing.TestService/UnaryCall to
	// Target.Host.
	Protocol Protocol
	// Transport sends the intents over HTTP. Nil means an h2c transport of
	// its own, closed at the end.
	Transport http.RoundTripper
	// Cutoff, when not zero, is when (from Start) the intents still out
	// are cancelled and counted as unfinished: nothing is sent after it,
	// retries included.
	Cutoff time.Duration
	// Shard, when its Count is more than 1, sends only the intents of the
	// clients it owns (client c when c mod Count is Index), on the same
	// schedule as the whole: the shards of a run together send what one
	// generator would.
	Shard grid.Shard
}

// LoadStats is what the generator did.
type LoadStats struct {
	// Due is intents the schedule called for; Sent were sent; Shed were
	// not, because MaxInFlight intents were already waiting.
	Due  int64 `json:"due"`
	Sent int64 `json:"sent"`
	Shed int64 `json:"shed"`
	// Succeeded got a success in time; Fallbacks got the gateway's
	// fallback; Lost never succeeded (fallbacks included).
	Succeeded int64 `json:"succeeded"`
	Fallbacks int64 `json:"fallbacks"`
	Lost      int64 `json:"lost"`
	// LateP99 and LateMax are how late intents were sent after they were
	// due, in seconds of wall-clock time: the check that the generator
	// never waited for an answer before sending the next (no coordinated
	// omission) and kept up with its schedule.
	LateP99 float64 `json:"late_p99_seconds"`
	LateMax float64 `json:"late_max_seconds"`
}

// RunLoad sends intents on schedule, whatever comes back, until the
// duration is over, then waits for the intents still out (each bounded by
// its deadline). It returns early, cancelling what is out, when ctx is
// done.
func RunLoad(ctx context.Context, cfg LoadConfig) (LoadStats, error) {
	if cfg.Target == nil || cfg.Deadline <= 0 {
		return LoadStats{}, errors.New("lab: LoadConfig needs a Target and a Deadline")
	}
	g := &generator{cfg: cfg}
	g.late.init(4096, cfg.Seed)
	if g.cfg.MaxInFlight <= 0 {
		g.cfg.MaxInFlight = 1 << 16
	}
	if g.cfg.Start.IsZero() {
		g.cfg.Start = time.Now()
	}
	switch cfg.Protocol {
	case "", ProtocolHTTP:
		g.send = newHTTPSender(cfg)
	case ProtocolGRPC:
		s, err := newGRPCSender(cfg)
		if err != nil {
			return LoadStats{}, err
		}
		g.send = s
	default:
		return LoadStats{}, fmt.Errorf("lab: LoadConfig.Protocol %q: want http or grpc", cfg.Protocol)
	}
	defer g.send.close()
	run := ctx
	if cfg.Cutoff > 0 {
		var cancel context.CancelFunc
		run, cancel = context.WithCancel(ctx)
		defer cancel()
		stop := time.AfterFunc(time.Until(g.cfg.Start.Add(cfg.Cutoff)), cancel)
		defer stop.Stop()
	}
	g.send.warm(run)
	g.schedule(run)
	g.wg.Wait()
	st := LoadStats{
		Due: g.due, Sent: g.sent.Load(), Shed: g.shed.Load(),
		Succeeded: g.ok.Load(), Fallbacks: g.fallbacks.Load(), Lost: g.lost.Load(),
	}
	q := g.late.quantiles(0.99, 1)
	st.LateP99, st.LateMax = q[0], q[1]
	return st, ctx.Err()
}

type generator struct {
	cfg  LoadConfig
	send sender
	wg   sync.WaitGroup
	out  atomic.Int64 // intents waiting
	due  int64
	late reservoir

	sent, shed, ok, fallbacks, lost atomic.Int64
}

// rateAt is the intent rate in force at t from the start: the latest load
// trigger's, as in the simulator.
func (g *generator) rateAt(t time.Duration) float64 {
	r, from := g.cfg.Traffic.RateAt(t, g.cfg.Tick), time.Duration(-1)
	for _, tr := range g.cfg.Triggers {
		if tr.Kind == scenario.TriggerLoad && t >= tr.At && t < tr.End() && tr.At > from {
			r, from = tr.Rate, tr.At
		}
	}
	return r
}

// nextLoadChange is the first start or end of a load trigger after t, and
// whether it is rather a rate series' change at a tick's start.
func (g *generator) nextLoadChange(t time.Duration) (time.Duration, bool) {
	best := time.Duration(math.MaxInt64)
	if tick := g.cfg.Tick; g.cfg.Traffic.Series != nil && tick > 0 {
		// The next tick whose start changes the series' rate.
		r := g.cfg.Traffic.RateAt(t, tick)
		for at := t - t%tick + tick; at < g.cfg.Duration; at += tick {
			if g.cfg.Traffic.RateAt(at, tick) != r {
				best = at
				break
			}
		}
	}
	series := true
	for _, tr := range g.cfg.Triggers {
		if tr.Kind != scenario.TriggerLoad {
			continue
		}
		for _, b := range [2]time.Duration{tr.At, tr.End()} {
			if b > t && b <= best {
				best, series = b, false
			}
		}
	}
	return best, series
}

// schedule sends every intent when it is due. It never waits for an
// answer: each intent has a goroutine of its own. When it falls behind (a
// pause), it sends what is due at once, and the lateness is measured.
func (g *generator) schedule(ctx context.Context) {
	rng := rand.New(rand.NewPCG(g.cfg.Seed, 0xa77))
	poisson := g.cfg.Traffic.Arrivals == "poisson"
	gap := func(rate float64) time.Duration {
		if rate <= 0 {
			return time.Duration(math.MaxInt64)
		}
		g := 1e9 / rate
		if poisson {
			g = rng.ExpFloat64() / rate * 1e9
		}
		if !(g < math.MaxInt64) { // a tiny rate: no next arrival, not garbage
			return time.Duration(math.MaxInt64)
		}
		return max(1, time.Duration(g))
	}
	first := func(from time.Duration) time.Duration {
		r := g.rateAt(from)
		if r <= 0 {
			return time.Duration(math.MaxInt64)
		}
		if poisson {
			return from + gap(r)
		}
		return from
	}
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	next := first(0)
	change, smooth := g.nextLoadChange(0)
	var id uint64
	for {
		// A rate change restarts arrivals at the new rate, as in the
		// simulator (exact for Poisson arrivals, which are memoryless);
		// a rate series' change keeps the phase of constant arrivals.
		for change <= next && change < g.cfg.Duration {
			old, now := g.rateAt(change-1), g.rateAt(change)
			if smooth && !poisson && old > 0 && now > 0 && next < time.Duration(math.MaxInt64) {
				next = change + time.Duration(float64(next-change)*old/now)
			} else if old != now || !smooth {
				next = first(change)
			}
			change, smooth = g.nextLoadChange(change)
		}
		if next >= g.cfg.Duration {
			return
		}
		due := g.cfg.Start.Add(next)
		if d := time.Until(due); d > 0 {
			timer.Reset(d)
			select {
			case <-ctx.Done():
				return
			case <-timer.C:
			}
		} else if ctx.Err() != nil {
			return
		}
		g.launch(ctx, id, due)
		id++
		if r := g.rateAt(next); r > 0 {
			next += gap(r)
		} else {
			next = time.Duration(math.MaxInt64)
		}
	}
}

// launch sends intent id, due at due, unless too many are out or
// another shard's client owns it.
func (g *generator) launch(ctx context.Context, id uint64, due time.Time) {
	if !g.cfg.Shard.Owns(int(id % uint64(max(g.cfg.Traffic.Clients, 1)))) {
		return
	}
	g.due++
	g.cfg.Tally.addNow(cIntents, due)
	if g.out.Load() >= int64(g.cfg.MaxInFlight) {
		g.shed.Add(1)
		g.lost.Add(1)
		g.cfg.Tally.lose(loss{unfinished: true})
		return
	}
	g.out.Add(1)
	g.sent.Add(1)
	g.late.add(time.Since(due).Seconds())
	g.wg.Go(func() {
		defer g.out.Add(-1)
		g.intent(ctx, id, due)
	})
}

// intent is one logical operation: one request to the gateway, which
// retries as its client's policy says.
func (g *generator) intent(ctx context.Context, id uint64, due time.Time) {
	deadline := due.Add(g.cfg.Deadline)
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	tf := g.cfg.Traffic
	in := call{id: id, client: id % uint64(max(tf.Clients, 1)), idempotent: true, deadline: deadline}
	if tf.Idempotent < 1 && unitHash(g.cfg.Seed, "i"+strconv.FormatUint(id, 10)) >= tf.Idempotent {
		in.idempotent = false
		if tf.Keys > 0 && unitHash(g.cfg.Seed, "k"+strconv.FormatUint(id, 10)) < tf.Keys {
			in.key = "intent-" + strconv.FormatUint(id, 10)
		}
	}
	r := g.send.send(ctx, in)
	if r.fallback {
		r.why.reason = resil.StopBreaker
		r.failed++ // the refusal is a failure the caller saw
	}
	if r.why.reason == resil.StopThrottled {
		r.failed++ // so is the throttle's
	}
	g.record(id, due, r.ok, r.fallback, r.failed, r.why)
}

// A sender sends intents to the gateway in one protocol.
type sender interface {
	// warm opens the connection before the first intent is due.
	warm(ctx context.Context)
	// send sends one intent and says how it went; ctx ends at its
	// deadline.
	send(ctx context.Context, in call) answer
	close()
}

// call is one intent as a sender sends it.
type call struct {
	id, client uint64
	idempotent bool // a GET; false: a POST, a call with a side effect
	key        string
	deadline   time.Time
}

// answer is how an intent went, as the gateway said.
type answer struct {
	ok, fallback bool
	failed       int  // attempts that failed
	why          loss // why the gateway stopped, when it did not succeed
}

// httpSender sends intents as HTTP requests: GET, or POST with a side
// effect.
type httpSender struct {
	target *url.URL
	url    string
	client *http.Client
	own    *http.Transport // closed by close
}

func newHTTPSender(cfg LoadConfig) *httpSender {
	s := &httpSender{target: cfg.Target, url: cfg.Target.String(), client: &http.Client{Transport: cfg.Transport}}
	if cfg.Transport == nil {
		s.own = h2cTransport()
		s.client.Transport = s.own
	}
	return s
}

func (s *httpSender) close() {
	if s.own != nil {
		s.own.CloseIdleConnections()
	}
}

func (s *httpSender) send(ctx context.Context, in call) answer {
	method := http.MethodGet
	if !in.idempotent {
		method = http.MethodPost
	}
	req, err := http.NewRequestWithContext(ctx, method, s.url, nil)
	if err != nil {
		return answer{failed: 1}
	}
	req.Header.Set(IntentHeader, strconv.FormatUint(in.id, 10))
	req.Header.Set(ClientHeader, strconv.FormatUint(in.client, 10))
	req.Header.Set(TimeoutHeader, resilhttp.FormatTimeout(time.Until(in.deadline)))
	if in.key != "" {
		req.Header.Set(resilhttp.DefaultKeyHeader, in.key)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		// The intent's deadline passed, or the run was stopped.
		return answer{failed: 1, why: loss{reason: resil.StopDeadline, unfinished: errors.Is(err, context.Canceled)}}
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
	_ = resp.Body.Close()
	a := answer{fallback: resp.Header.Get(FallbackHeader) != ""}
	a.failed, _ = strconv.Atoi(resp.Header.Get(FailedHeader))
	a.ok = resp.StatusCode < 300 && !a.fallback
	// The gateway's word for why it stopped; a word it does not know is
	// StopNone, filed with the retries exhausted.
	_ = a.why.reason.UnmarshalText([]byte(resp.Header.Get(StopHeader)))
	return a
}

// record books how intent id ended.
func (g *generator) record(id uint64, due time.Time, ok, fallback bool, failed int, why loss) {
	t := g.cfg.Tally
	if g.cfg.ClearAt >= 0 && failed > 0 && !due.Before(g.cfg.Start.Add(g.cfg.ClearAt)) {
		t.inc(tVictims)
	}
	if fallback {
		g.fallbacks.Add(1)
	}
	if ok {
		g.ok.Add(1)
		t.succeed(time.Since(due))
		return
	}
	g.lost.Add(1)
	t.lose(why)
}

// warm opens the connection to the gateway before the first intent is due.
func (s *httpSender) warm(ctx context.Context) {
	u := *s.target
	u.Path = healthPath
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return
	}
	if resp, err := s.client.Do(req); err == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
	}
}
