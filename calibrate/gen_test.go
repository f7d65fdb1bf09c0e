package calibrate_test

import (
	"flag"
	"math"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/common/model"
)

var makeTestdata = flag.Bool("make-testdata", false, "TestMakeTestdata: rewrite testdata/{envoy,grpc,haproxy,resil}.json from their models")

// A model of a service and its callers, stepped every 15 s, from which
// each product's metrics are written as that product names them: the
// saved answers the golden tests read (testdata/*.json), with the truth
// they must give back. Each step: intents arrive per instance (Poisson,
// around the step's rate), a share is retried, the origin serves them
// with the service-time distribution; where the offered load passes the
// workers' capacity the origin saturates: every worker busy, a queue, and
// the latency of the queued requests lengthened by their wait. Counters
// accumulate from a random start, gauges are sampled at the step's end.
type genModel struct {
	instances int
	rate      func(step int) float64 // intents per second, all instances
	retry     float64                // retries per intent
	workers   int
	service   func(r *rand.Rand) float64 // seconds
	mean      float64                    // of service
	errShare  float64
	steps     int // 15 s steps; zero means genSteps
	// retryAt, if set, is the retries per intent of each step, in place
	// of retry (a storm's steps).
	retryAt func(step int) float64
	// The shares of the attempts Envoy's per-try timeout cut, and of the
	// requests its route timeout ended (buildEnvoy).
	perTry, rqTimeout float64
}

const (
	genSteps = 120 // 30 minutes at 15 s
	genStep  = 15 * time.Second
)

var genStart = time.Date(2026, 11, 30, 14, 0, 0, 0, time.UTC)

type genStepOut struct {
	intents, retries, errs []float64 // per instance
	lat                    [][]float64
	busy, queue            float64
}

func (m genModel) run(seed uint64) []genStepOut {
	r := rand.New(rand.NewPCG(seed, 23))
	n := m.steps
	if n == 0 {
		n = genSteps
	}
	out := make([]genStepOut, n)
	backlog := 0.0
	for s := range out {
		o := &out[s]
		capacity := float64(m.workers) / m.mean
		retry := m.retry
		if m.retryAt != nil {
			retry = m.retryAt(s)
		}
		offered := m.rate(s) * (1 + retry)
		backlog = max(0, backlog+(offered-capacity)*genStep.Seconds())
		wait := backlog / capacity
		for i := 0; i < m.instances; i++ {
			lam := m.rate(s) / float64(m.instances) * genStep.Seconds()
			n := poisson(r, lam)
			rt := poisson(r, lam*retry)
			o.intents = append(o.intents, float64(n))
			o.retries = append(o.retries, float64(rt))
			o.errs = append(o.errs, math.Round(float64(n+rt)*m.errShare))
			var lat []float64
			for range n + rt {
				lat = append(lat, m.service(r)+wait*r.Float64())
			}
			o.lat = append(o.lat, lat)
		}
		if backlog > 0 {
			o.busy, o.queue = float64(m.workers), math.Round(backlog)
		} else {
			o.busy = math.Round(offered * m.mean)
		}
	}
	return out
}

func poisson(r *rand.Rand, lam float64) int {
	// Normal approximation: lam is in the hundreds or more here.
	return max(0, int(math.Round(lam+math.Sqrt(lam)*r.NormFloat64())))
}

// matrix builds series step by step.
type matrix struct {
	series map[string]*model.SampleStream
	order  []string
}

func (m *matrix) add(name string, labels map[string]string, step int, v float64, counter bool) {
	ls := model.Metric{model.MetricNameLabel: model.LabelValue(name)}
	for k, x := range labels {
		ls[model.LabelName(k)] = model.LabelValue(x)
	}
	key := ls.String()
	if m.series == nil {
		m.series = map[string]*model.SampleStream{}
	}
	ss, ok := m.series[key]
	if !ok {
		ss = &model.SampleStream{Metric: ls}
		m.series[key] = ss
		m.order = append(m.order, key)
	}
	if counter && len(ss.Values) > 0 {
		v += float64(ss.Values[len(ss.Values)-1].Value)
	} else if counter {
		v += 1000 // a counter from before the window
	}
	ss.Values = append(ss.Values, model.SamplePair{Timestamp: model.TimeFromUnixNano(genStart.Add(time.Duration(step) * genStep).UnixNano()), Value: model.SampleValue(v)})
}

// histogram adds a classic histogram's increments for one step, each
// bound written as le by format: 'g' as client_golang writes it (the
// Go and OTel exporters: 1e-05), 'f' as Envoy does (fmt's {:.32g} in
// source/server/admin/prometheus_stats.cc: 3600000, never 3.6e+06).
func (m *matrix) histogram(base string, labels map[string]string, step int, obs []float64, bounds []float64, scale float64, format byte) {
	with := func(le string) map[string]string {
		c := map[string]string{"le": le}
		for k, v := range labels {
			c[k] = v
		}
		return c
	}
	sum := 0.0
	for _, o := range obs {
		sum += o / scale
	}
	for _, b := range bounds {
		n := 0
		for _, o := range obs {
			if o/scale <= b {
				n++
			}
		}
		m.add(base+"_bucket", with(strconv.FormatFloat(b, format, -1, 64)), step, float64(n), true)
	}
	m.add(base+"_bucket", with("+Inf"), step, float64(len(obs)), true)
	m.add(base+"_sum", labels, step, sum, true)
	m.add(base+"_count", labels, step, float64(len(obs)), true)
}

func (m *matrix) result() model.Matrix {
	var out model.Matrix
	for _, k := range m.order {
		out = append(out, m.series[k])
	}
	return out
}

func lognormal(median, sigma float64) func(*rand.Rand) float64 {
	return func(r *rand.Rand) float64 { return median * math.Exp(sigma*r.NormFloat64()) }
}

func inst(i int) string { return "10.0.0." + strconv.Itoa(i+1) + ":9090" }

// The models and the truth each golden test checks.
var genModels = map[string]struct {
	model genModel
	build func(genModel, []genStepOut) model.Matrix
}{
	// Three Envoy pods in front of a service of 40 connections (its
	// pool's limit) whose service time is lognormal, median 40ms, σ 0.5;
	// 600 intents/s with a burst to 1000/s for four steps; 5% retried.
	"envoy": {genModel{instances: 3, retry: 0.05, workers: 40, mean: 0.040 * math.Exp(0.125), errShare: 0.002,
		service: lognormal(0.040, 0.5),
		rate: func(s int) float64 {
			if s >= 60 && s < 64 {
				return 1000
			}
			return 600
		}}, buildEnvoy},
	// gRPC clients on four instances calling a server whose service time
	// is exponential, mean 20ms; the rate follows a ramp from 200/s to
	// 400/s (so the rate is written as a series); 10% retried.
	"grpc": {genModel{instances: 4, retry: 0.10, workers: 16, mean: 0.020,
		service: func(r *rand.Rand) float64 { return r.ExpFloat64() * 0.020 },
		rate:    func(s int) float64 { return 200 + 200*float64(s)/genSteps }}, buildGRPC},
	// HAProxy with two servers of maxconn 10 each; mean response 50ms;
	// 150 requests/s.
	"haproxy": {genModel{instances: 1, workers: 20, mean: 0.050,
		service: func(*rand.Rand) float64 { return 0.050 },
		rate:    func(int) float64 { return 150 }}, buildHAProxy},
	// Five services each with one resil Guard, 50 intents/s each, 8%
	// retried, a budget that refused some; attempt latency lognormal,
	// median 30ms, σ 0.3, at the client.
	"resil": {genModel{instances: 5, retry: 0.08, workers: 30, mean: 0.030 * math.Exp(0.045),
		service: lognormal(0.030, 0.3),
		rate:    func(int) float64 { return 250 }}, buildResil},
}

// Envoy's default histogram buckets, in ms, as upstream_rq_time has them
// (source/common/stats/histogram_impl.cc, defaultBuckets).
var envoyBounds = []float64{0.5, 1, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000, 60000, 300000, 600000, 1800000, 3600000}

// grpc-go's DefaultLatencyBounds (stats/opentelemetry/opentelemetry.go).
var grpcBounds = []float64{0, 0.00001, 0.00005, 0.0001, 0.0003, 0.0006, 0.0008, 0.001, 0.002, 0.003, 0.004, 0.005, 0.006, 0.008, 0.01, 0.013, 0.016, 0.02, 0.025, 0.03, 0.04, 0.05, 0.065, 0.08, 0.1, 0.13, 0.16, 0.2, 0.25, 0.3, 0.4, 0.5, 0.65, 0.8, 1, 2, 5, 10, 20, 50, 100}

// resilprom's DefaultBuckets.
var resilBounds = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}

func buildEnvoy(g genModel, steps []genStepOut) model.Matrix {
	var m matrix
	for s, o := range steps {
		for i := range g.instances {
			l := map[string]string{"job": "envoy", "instance": inst(i), "envoy_cluster_name": "checkout"}
			att := o.intents[i] + o.retries[i]
			m.add("envoy_cluster_upstream_rq_total", l, s, att, true)
			m.add("envoy_cluster_upstream_rq_retry", l, s, o.retries[i], true)
			m.add("envoy_cluster_upstream_rq_retry_overflow", l, s, 0, true)
			m.add("envoy_cluster_upstream_rq_timeout", l, s, math.Round(o.intents[i]*g.rqTimeout), true)
			m.add("envoy_cluster_upstream_rq_per_try_timeout", l, s, math.Round(att*g.perTry), true)
			c2 := map[string]string{"envoy_response_code_class": "2"}
			c5 := map[string]string{"envoy_response_code_class": "5"}
			for k, v := range l {
				c2[k], c5[k] = v, v
			}
			m.add("envoy_cluster_upstream_rq_xx", c2, s, att-o.errs[i], true)
			m.add("envoy_cluster_upstream_rq_xx", c5, s, o.errs[i], true)
			m.histogram("envoy_cluster_upstream_rq_time", l, s, o.lat[i], envoyBounds, 1e-3, 'f')
			// Each pod's share of what is in flight, and of the pending
			// requests when its pool is full.
			m.add("envoy_cluster_upstream_rq_active", l, s, o.busy/float64(g.instances), false)
			m.add("envoy_cluster_upstream_rq_pending_active", l, s, math.Round(o.queue/float64(g.instances)), false)
			m.add("envoy_cluster_membership_healthy", l, s, 4, false)
		}
	}
	return m.result()
}

// buildGRPC writes what grpc-go's OpenTelemetry plugin (v1.85.0,
// stats/opentelemetry/client_metrics.go and server_metrics.go) exports
// through the OTel Prometheus exporter, as TestRealGRPC scraped it: every
// series carries otel_scope_name "grpc-go" and its version; the clients'
// carry grpc_method and grpc_target, their durations grpc_status; the
// server's call.started carries grpc_method only (the status is not known
// when a call starts), its call.duration grpc_status too. A share p of
// the attempts fail UNAVAILABLE, retried up to maxAttempts 3: p + p² is
// the model's retries per intent, and p³ of the calls fail all three
// attempts. The server's started calls run ahead of its finished ones by
// the calls in it at each step's end.
func buildGRPC(g genModel, steps []genStepOut) model.Matrix {
	var m matrix
	scope := map[string]string{"otel_scope_name": "grpc-go", "otel_scope_version": "1.85.0", "otel_scope_schema_url": ""}
	with := func(l map[string]string, kv ...string) map[string]string {
		c := map[string]string{}
		for k, v := range scope {
			c[k] = v
		}
		for k, v := range l {
			c[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			c[kv[i]] = kv[i+1]
		}
		return c
	}
	p := (math.Sqrt(1+4*g.retry) - 1) / 2 // p + p² = g.retry
	exhausted := make([]float64, g.instances)
	inFlight := 0.0
	server := map[string]string{"job": "cart", "instance": "10.0.1.1:9464", "grpc_method": "shop.Cart/Get"}
	for s, o := range steps {
		var ok, failed []float64
		for i := range g.instances {
			l := map[string]string{"job": "frontend", "instance": inst(i), "grpc_method": "shop.Cart/Get", "grpc_target": "dns:///cart:443"}
			// The calls that failed every attempt, carried so that the
			// fraction is not rounded away at each step.
			exhausted[i] += o.intents[i] * p * p * p
			e := math.Floor(exhausted[i])
			exhausted[i] -= e
			m.add("grpc_client_attempt_started_total", with(l), s, o.intents[i]+o.retries[i], true)
			m.add("grpc_client_attempt_duration_seconds_count", with(l, "grpc_status", "OK"), s, o.intents[i]-e, true)
			m.add("grpc_client_attempt_duration_seconds_count", with(l, "grpc_status", "UNAVAILABLE"), s, o.retries[i]+e, true)
			m.add("grpc_client_call_duration_seconds_count", with(l, "grpc_status", "OK"), s, o.intents[i]-e, true)
			m.add("grpc_client_call_duration_seconds_count", with(l, "grpc_status", "UNAVAILABLE"), s, e, true)
			n := int(o.intents[i] - e)
			ok = append(ok, o.lat[i][:n]...)
			failed = append(failed, o.lat[i][n:]...)
		}
		now := o.busy + o.queue
		m.add("grpc_server_call_started_total", with(server), s, float64(len(ok)+len(failed))+now-inFlight, true)
		inFlight = now
		m.histogram("grpc_server_call_duration_seconds", with(server, "grpc_status", "OK"), s, ok, grpcBounds, 1, 'g')
		m.histogram("grpc_server_call_duration_seconds", with(server, "grpc_status", "UNAVAILABLE"), s, failed, grpcBounds, 1, 'g')
	}
	return m.result()
}

func buildHAProxy(g genModel, steps []genStepOut) model.Matrix {
	var m matrix
	for s, o := range steps {
		b := map[string]string{"job": "haproxy", "instance": "lb:8405", "proxy": "app"}
		m.add("haproxy_backend_http_requests_total", b, s, o.intents[0], true)
		m.add("haproxy_backend_retry_warnings_total", b, s, 0, true)
		for _, code := range []string{"1xx", "2xx", "3xx", "4xx", "5xx", "other"} {
			c := map[string]string{"code": code}
			for k, v := range b {
				c[k] = v
			}
			v := 0.0
			if code == "2xx" {
				v = o.intents[0]
			}
			m.add("haproxy_backend_http_responses_total", c, s, v, true)
		}
		m.add("haproxy_backend_current_queue", b, s, o.queue, false)
		m.add("haproxy_backend_response_time_average_seconds", b, s, g.mean, false)
		m.add("haproxy_backend_active_servers", b, s, 2, false)
		for _, srv := range []string{"app1", "app2"} {
			l := map[string]string{"job": "haproxy", "instance": "lb:8405", "proxy": "app", "server": srv}
			m.add("haproxy_server_current_sessions", l, s, o.busy/2, false)
			m.add("haproxy_server_limit_sessions", l, s, float64(g.workers/2), false)
		}
	}
	return m.result()
}

func buildResil(g genModel, steps []genStepOut) model.Matrix {
	var m matrix
	for s, o := range steps {
		for i := range g.instances {
			l := map[string]string{"job": "checkout", "instance": inst(i), "name": "payments"}
			m.add("resil_intents_total", l, s, o.intents[i], true)
			m.add("resil_attempts_total", l, s, o.intents[i]+o.retries[i], true)
			m.add("resil_retries_total", l, s, o.retries[i], true)
			m.add("resil_budget_denials_total", l, s, math.Round(o.retries[i]/10), true)
			m.add("resil_breaker_refusals_total", l, s, 0, true)
			m.add("resil_budget_tokens", l, s, 42, false)
			ok := map[string]string{"kind": "first", "outcome": "success"}
			for k, v := range l {
				ok[k] = v
			}
			m.histogram("resil_attempt_duration_seconds", ok, s, o.lat[i], resilBounds, 1, 'g')
		}
	}
	return m.result()
}

// TestMakeTestdata writes the golden tests' saved answers from the
// models above: go test ./calibrate -run TestMakeTestdata -make-testdata.
func TestMakeTestdata(t *testing.T) {
	if !*makeTestdata {
		t.Skip("-make-testdata rewrites testdata/{envoy,grpc,haproxy,resil}.json")
	}
	for name, g := range genModels {
		writeAnswer(t, "testdata/"+name+".json", g.build(g.model, g.model.run(1)))
	}
}
