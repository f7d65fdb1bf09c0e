package calibrate

import (
	"fmt"
	"slices"
	"strings"

	"github.com/prometheus/common/model"
)

// Ref names a metric and, optionally, the series of it to count: a label
// that must equal (or, with Not, must differ from) one of Values.
type Ref struct {
	Metric string
	Label  model.LabelName
	Values []string
	Not    bool
}

func (r Ref) ok() bool { return r.Metric != "" }

func (r Ref) keeps(ls model.LabelSet) bool {
	if r.Label == "" {
		return true
	}
	v := string(ls[r.Label])
	in := false
	for _, x := range r.Values {
		if v == x {
			in = true
		}
	}
	return in != r.Not
}

// String writes r as a PromQL selector, for the comments.
func (r Ref) String() string {
	if r.Label == "" {
		return r.Metric
	}
	op, val := "=", r.Values[0]
	if len(r.Values) > 1 {
		op, val = "=~", strings.Join(r.Values, "|")
	}
	if r.Not {
		op = "!" + op[1:]
		if op == "!" {
			op = "!="
		}
	}
	return fmt.Sprintf("%s{%s%s%q}", r.Metric, r.Label, op, val)
}

// Hist names a classic histogram: its base name (the _bucket, _sum and
// _count series are Base+suffix) and the factor that turns its unit into
// seconds.
type Hist struct {
	Base  string
	Scale float64
	// Filter keeps the series it counts, as Ref does.
	Filter Ref
}

func (h Hist) ok() bool { return h.Base != "" }

// Source is one product's metrics, each named as the product exports it.
// A zero Ref or Hist means the product exports no such metric.
type Source struct {
	Name string
	// Detect are the metrics whose presence says the product is there.
	Detect []string
	// Attempts counts the requests that reach the origin (first attempts
	// and retries); Intents the calls the clients started (first
	// attempts); when Intents is not exported it is Attempts − Retries.
	Attempts, Intents, Retries Ref
	// RetryOverflow counts retries a limit refused (Envoy's retry budget
	// or max_retries circuit breaker, resil's budget).
	RetryOverflow Ref
	// Errors counts failed requests; Timeouts those that timed out.
	Errors, Timeouts Ref
	// FailedIntents counts the calls that failed after their retries, by
	// the same status label as Errors (gRPC's call duration): a status
	// whose failed attempts outnumber its failed calls was retried, and
	// how often a call fails every attempt tells the attempts it gets.
	FailedIntents Ref
	// PerTryTimeouts counts the attempts a per-attempt timeout cut, where
	// the product counts them apart (Envoy); Timeouts then counts the
	// whole request's timeout, its deadline, which ends the intent.
	PerTryTimeouts Ref
	// Latency is the time requests take at the origin: ServerSide says
	// whether it is measured there (else at the client: it includes the
	// network).
	Latency    Hist
	ServerSide bool
	// Busy is a gauge of requests in service (or in flight); Queue of
	// requests waiting for a worker; Limit of the concurrency limit
	// configured (HAProxy's maxconn); Mean a gauge of the mean latency,
	// where there is no histogram (HAProxy), in seconds.
	Busy, Queue, Limit, Mean Ref
	// MeanWithoutQueue, where the Mean gauge leaves the time requests
	// waited in the queue out, says so: the service time is then read from
	// every step, not only those with an empty queue.
	MeanWithoutQueue string
	// Started and Finished count the calls the origin started and
	// finished, where it exports no Busy gauge (gRPC): their difference at
	// a sample is the calls in the origin then, in service or waiting for
	// a worker, and Finished per step times the service time is the
	// workers busy on average over the step (Little's law).
	Started, Finished Ref
	// Clients is the metric whose distinct label sets (of ClientLabels)
	// count the client instances; empty: they cannot be counted.
	Clients      Ref
	ClientLabels []model.LabelName
	// Healthy is a gauge of the healthy replicas of the origin.
	Healthy Ref
	// Budget is a gauge exported only when a retry budget is in use;
	// BreakerRefusals counts calls a breaker refused.
	Budget, BreakerRefusals Ref
	// RetriesUnseen, where the product counts its clients' retries as
	// requests like any other and no metric tells them apart (a proxy
	// in front of the origin: its own retries are counted, its callers'
	// are not), says so: before an incident the requests are the intents
	// (few retries), but once calls fail, a rise of requests may be
	// retries. Replay then takes the intents from the incident on as
	// unknown.
	RetriesUnseen string
	// Wasted counts requests the origin served after their client had
	// given up (work nobody waited for), where the product exports it
	// (the lab): replay's evidence of a backlog that outlives its cause.
	Wasted Ref
	// Capacity is a gauge of the origin's capacity in requests per second,
	// where the product exports one (the lab): a cross-check, never used
	// as the fit.
	Capacity Ref
	// Policy says what the product's metrics tell of its retry policy,
	// and what they do not, for the comments.
	Policy string
	// DefaultRetries is the retry count the product uses when a policy
	// sets none, for the fleet; -1 when the product has no such default.
	DefaultRetries int
	DefaultWhy     string
	// MaxAttempts is the most attempts a call can get whatever its policy
	// says (gRPC's cap), for the estimate of the attempts; 0: no cap.
	MaxAttempts    int
	MaxAttemptsWhy string
}

// Metrics lists every metric s reads.
func (s *Source) Metrics() []string {
	var out []string
	seen := map[string]bool{}
	add := func(n string) {
		if n != "" && !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	for _, r := range []Ref{s.Attempts, s.Intents, s.Retries, s.RetryOverflow, s.Errors, s.Timeouts, s.PerTryTimeouts, s.FailedIntents,
		s.Busy, s.Queue, s.Limit, s.Mean, s.Started, s.Finished, s.Clients, s.Healthy, s.Budget, s.BreakerRefusals, s.Capacity, s.Wasted} {
		add(r.Metric)
	}
	if s.Latency.ok() {
		add(s.Latency.Base + "_bucket")
		add(s.Latency.Base + "_sum")
		add(s.Latency.Base + "_count")
	}
	return out
}

// Sources are the products calibrate reads, in the order --source auto
// tries them: the lab before resil, whose metrics its gateway exports too. Their metric names are each product's own; docs/calibrate.md
// cites where each was read.
var Sources = []*Source{
	{
		// Envoy's cluster statistics through its Prometheus endpoint
		// (/stats/prometheus): counters keep their stat names (no _total
		// added), the cluster is the tag envoy_cluster_name, the response
		// class the tag envoy_response_code_class of upstream_rq_xx, and
		// upstream_rq_time is a histogram in milliseconds whose default
		// bounds run 0.5 to 3600000 (written so, never 3.6e+06). Read in
		// the envoyproxy/envoy sources (2026-12-01): the counters and
		// gauges in ALL_CLUSTER_TRAFFIC_STATS and membership_healthy in
		// ALL_CLUSTER_ENDPOINT_STATS, envoy/upstream/upstream.h (02a45cb);
		// upstream_rq_<class>xx and the upstream_rq_time timer,
		// CodeUtility::chargeResponseStat and chargeResponseTiming in
		// source/common/http/codes.cc; the tag extractors "_rq_(\d)xx$"
		// and "^cluster\.(([^\.]+)\.).*", source/common/config/well_known_names.cc;
		// HistogramSettingsImpl::defaultBuckets, source/common/stats/histogram_impl.cc;
		// the exposition (envoy_cluster_upstream_cx_length_ms_bucket{envoy_cluster_name="cluster_0",le="0.5"},
		// "# TYPE envoy_http_downstream_rq_xx counter"),
		// test/integration/integration_admin_test.cc (93a67d5). No Envoy
		// binary could be run here to scrape (Debian packages none): the
		// modelled envoy.json follows these sources.
		Name:           "envoy",
		Detect:         []string{"envoy_cluster_upstream_rq_total"},
		Attempts:       Ref{Metric: "envoy_cluster_upstream_rq_total"},
		Retries:        Ref{Metric: "envoy_cluster_upstream_rq_retry"},
		RetryOverflow:  Ref{Metric: "envoy_cluster_upstream_rq_retry_overflow"},
		Errors:         Ref{Metric: "envoy_cluster_upstream_rq_xx", Label: "envoy_response_code_class", Values: []string{"5"}},
		Timeouts:       Ref{Metric: "envoy_cluster_upstream_rq_timeout"},
		PerTryTimeouts: Ref{Metric: "envoy_cluster_upstream_rq_per_try_timeout"},
		Latency:        Hist{Base: "envoy_cluster_upstream_rq_time", Scale: 1e-3},
		Busy:           Ref{Metric: "envoy_cluster_upstream_rq_active"},
		Queue:          Ref{Metric: "envoy_cluster_upstream_rq_pending_active"},
		Clients:        Ref{Metric: "envoy_cluster_upstream_rq_total"},
		ClientLabels:   []model.LabelName{"instance"},
		Healthy:        Ref{Metric: "envoy_cluster_membership_healthy"},
		Policy:         "Envoy exports how many retries it sent (upstream_rq_retry) and refused (upstream_rq_retry_overflow: the retry budget or the max_retries circuit breaker), not the route's num_retries or retry_on",
		DefaultRetries: 1,
		DefaultWhy:     "Envoy's num_retries when a route's retry policy sets none",
	},
	{
		// gRPC's OpenTelemetry metrics (gRFC A66) through the OTel
		// Prometheus exporter: dots become underscores, a counter gains
		// _total (its unit, {attempt} or {call}, adds nothing), a
		// histogram in s gains _seconds; the attributes grpc.method,
		// grpc.target and grpc.status become labels with underscores, and
		// every series carries otel_scope_name="grpc-go" and
		// otel_scope_version. The server's call.started has grpc_method
		// only. The exporter adds no instance label: each process is a
		// Prometheus target, told apart by the instance label Prometheus
		// gives (its resource goes to target_info). grpc-go v1.85.0,
		// stats/opentelemetry/client_metrics.go and server_metrics.go,
		// exported by go.opentelemetry.io/otel/exporters/prometheus
		// v0.69.0: scraped for real by TestRealGRPC.
		Name:           "grpc",
		Detect:         []string{"grpc_client_attempt_started_total", "grpc_server_call_started_total"},
		Attempts:       Ref{Metric: "grpc_client_attempt_started_total"},
		Intents:        Ref{Metric: "grpc_client_call_duration_seconds_count"},
		Errors:         Ref{Metric: "grpc_client_attempt_duration_seconds_count", Label: "grpc_status", Values: []string{"OK"}, Not: true},
		Timeouts:       Ref{Metric: "grpc_client_attempt_duration_seconds_count", Label: "grpc_status", Values: []string{"DEADLINE_EXCEEDED"}},
		FailedIntents:  Ref{Metric: "grpc_client_call_duration_seconds_count", Label: "grpc_status", Values: []string{"OK"}, Not: true},
		Latency:        Hist{Base: "grpc_server_call_duration_seconds", Scale: 1, Filter: Ref{Label: "grpc_status", Values: []string{"OK"}}},
		ServerSide:     true,
		Started:        Ref{Metric: "grpc_server_call_started_total"},
		Finished:       Ref{Metric: "grpc_server_call_duration_seconds_count"},
		Clients:        Ref{Metric: "grpc_client_attempt_started_total"},
		ClientLabels:   []model.LabelName{"instance"},
		Policy:         "gRPC exports attempts and calls by status (so retries = attempts − calls, and the statuses retried), not the service config's maxAttempts, backoff or retryable codes, nor a retry throttle's tokens",
		DefaultRetries: -1,
		// gRFC A6 ("Limits on Retries and Hedges"): a client treats a
		// maxAttempts over 5 as 5. grpc-go v1.85.0: dialoptions.go,
		// defaultMaxCallAttempts = 5; service_config.go,
		// convertRetryPolicy, takes the lesser of the policy's
		// maxAttempts and the channel's (raised only by
		// WithMaxCallAttempts).
		MaxAttempts:    5,
		MaxAttemptsWhy: "gRPC clients treat a maxAttempts over 5 as 5 (gRFC A6; grpc-go's service config parsing takes the lesser of it and the channel's limit, 5 unless WithMaxCallAttempts raises it)",
	},
	{
		// HAProxy's built-in exporter (promex, HAProxy 2.x and 3.x): the
		// proxy is the label proxy, the server the label server; response
		// times are averages over the last 1024 requests, not histograms.
		Name:     "haproxy",
		Detect:   []string{"haproxy_backend_http_requests_total"},
		Attempts: Ref{Metric: "haproxy_backend_http_requests_total"},
		Retries:  Ref{Metric: "haproxy_backend_retry_warnings_total"},
		Errors:   Ref{Metric: "haproxy_backend_http_responses_total", Label: "code", Values: []string{"5xx"}},
		Busy:     Ref{Metric: "haproxy_server_current_sessions"},
		Queue:    Ref{Metric: "haproxy_backend_current_queue"},
		Limit:    Ref{Metric: "haproxy_server_limit_sessions"},
		Mean:     Ref{Metric: "haproxy_backend_response_time_average_seconds"},
		// The stats' rtime, the server's response time; the queue's wait
		// is qtime, apart (HAProxy's management guide, the statistics'
		// fields; TestRealHAProxy reads 21ms for the Lua service's 20ms
		// with a queue of thousands).
		MeanWithoutQueue: "HAProxy's response time leaves the queue's wait out (its queue time is apart)",
		Healthy:          Ref{Metric: "haproxy_backend_active_servers"},
		Policy:           "HAProxy retries connections (retries, option redispatch), counted by retry_warnings; it does not retry an HTTP answer unless retry-on says so, and exports neither setting",
		RetriesUnseen:    "HAProxy counts the requests its clients send, their retries among them: retry_warnings counts only its own",
		DefaultRetries:   3,
		DefaultWhy:       "HAProxy's default retries",
	},
	{
		// The lab's origin and gateway (lab/metrics.go, lab/origin.go,
		// lab/gateway.go); the gateway's clients are resil Guards exported
		// by resilprom, one name each.
		Name:            "lab",
		Detect:          []string{"retrystorm_origin_requests_total"},
		Attempts:        Ref{Metric: "retrystorm_origin_attempts_total"},
		Intents:         Ref{Metric: "retrystorm_origin_attempts_total", Label: "kind", Values: []string{"first", "unknown"}},
		Retries:         Ref{Metric: "retrystorm_origin_attempts_total", Label: "kind", Values: []string{"retry"}},
		RetryOverflow:   Ref{Metric: "retrystorm_gateway_budget_denials_total"},
		Errors:          Ref{Metric: "retrystorm_origin_requests_total", Label: "result", Values: []string{"ok"}, Not: true},
		Timeouts:        Ref{Metric: "retrystorm_origin_requests_total", Label: "result", Values: []string{"unanswered"}},
		Latency:         Hist{Base: "retrystorm_origin_request_duration_seconds", Scale: 1},
		ServerSide:      true,
		Busy:            Ref{Metric: "retrystorm_origin_workers_busy"},
		Queue:           Ref{Metric: "retrystorm_origin_queue_length"},
		Clients:         Ref{Metric: "resil_intents_total"},
		ClientLabels:    []model.LabelName{"instance", "name"},
		Budget:          Ref{Metric: "resil_budget_tokens"},
		BreakerRefusals: Ref{Metric: "retrystorm_gateway_breaker_refusals_total"},
		Capacity:        Ref{Metric: "retrystorm_origin_capacity"},
		Wasted:          Ref{Metric: "retrystorm_origin_wasted_work_total"},
		Policy:          "the lab's gateway exports retries, budget denials and breaker refusals, not its fleet's max_retries or backoff",
		DefaultRetries:  -1,
	},
	{
		// resil's own metrics: resil/resilprom (one set of series per
		// Guard, labelled name) and resil/resilotel through the OTel
		// Prometheus exporter, which give the same names but for retries,
		// attempts of kind retry there.
		Name:            "resil",
		Detect:          []string{"resil_intents_total"},
		Attempts:        Ref{Metric: "resil_attempts_total"},
		Intents:         Ref{Metric: "resil_intents_total"},
		Retries:         Ref{Metric: "resil_retries_total"},
		RetryOverflow:   Ref{Metric: "resil_budget_denials_total"},
		Errors:          Ref{Metric: "resil_attempt_duration_seconds_count", Label: "outcome", Values: []string{"success", "ok"}, Not: true},
		Timeouts:        Ref{Metric: "resil_attempt_duration_seconds_count", Label: "outcome", Values: []string{"timeout"}},
		Latency:         Hist{Base: "resil_attempt_duration_seconds", Scale: 1, Filter: Ref{Label: "outcome", Values: []string{"success", "ok"}}},
		Clients:         Ref{Metric: "resil_intents_total"},
		ClientLabels:    []model.LabelName{"instance", "name", "resil_guard_name"},
		Budget:          Ref{Metric: "resil_budget_tokens"},
		BreakerRefusals: Ref{Metric: "resil_breaker_refusals_total"},
		Policy:          "resil exports retries, budget denials, the budget's tokens and breaker refusals, not the policy's max_retries, backoff or budget ratio",
		DefaultRetries:  -1,
	},
}

// SourceNamed returns the source called name.
func SourceNamed(name string) (*Source, error) {
	var names []string
	for _, s := range Sources {
		if s.Name == name {
			return s, nil
		}
		names = append(names, s.Name)
	}
	return nil, fmt.Errorf("unknown source %q: want %s or auto", name, strings.Join(names, ", "))
}

// Detect returns the source whose metrics w holds: of those present, the
// first whose request counter counted requests in the window, else the
// first (an idle job's metrics, an HAProxy that serves nothing, are
// beside the busy service's more often than not: issue 37).
func Detect(w *Window) (*Source, error) {
	var found []*Source
	for _, s := range Sources {
		if slices.ContainsFunc(s.Detect, w.Has) {
			found = append(found, s)
		}
	}
	for _, s := range found {
		if w.Has(s.Attempts.Metric) && Counter(w, s.Attempts).total() > 0 {
			return s, nil
		}
	}
	if len(found) > 0 {
		return found[0], nil
	}
	var want []string
	for _, s := range Sources {
		want = append(want, s.Name+" ("+s.Detect[0]+")")
	}
	have := w.Names()
	if len(have) > 8 {
		have = append(have[:8], "...")
	}
	return nil, fmt.Errorf("no known source in the window: it holds %s; calibrate reads %s", strings.Join(have, ", "), strings.Join(want, ", "))
}
