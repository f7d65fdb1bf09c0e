package calibrate_test

import (
	"maps"
	"math"
	"strings"
	"testing"
)

// TestGRPCRetryPolicy: the retried statuses and maxAttempts from failed
// attempts and failed calls by grpc_status, as grpc-go's OpenTelemetry
// plugin counts them (v1.85.0, stats/opentelemetry/client_metrics.go:
// attempt.duration and call.duration, both with grpc.status). Each step,
// 1,000 calls; a share p of the attempts fail UNAVAILABLE, each on its
// own, retried up to maxAttempts; INTERNAL, never retried, fails a share of
// calls at their first attempt.
func TestGRPCRetryPolicy(t *testing.T) {
	for _, c := range []struct {
		name        string
		p           float64 // attempts failing UNAVAILABLE
		maxAttempts int
		retried     bool    // UNAVAILABLE is in retryableStatusCodes
		internal    float64 // calls failing INTERNAL, not retried
		want        float64 // max_retries written
		known       bool
		note        string
	}{
		{"maxAttempts 3", 0.25, 3, true, 0, 2, true, "M = 3.00"},
		{"maxAttempts 5", 0.4, 5, true, 0, 4, true, "M = 5.00"},
		{"a status not retried beside", 0.25, 3, true, 0.02, 2, true, "UNAVAILABLE (grpc_client"},
		{"too few calls fail every attempt", 0.05, 3, true, 0, 3, false, "too few to estimate"},
		{"nothing retried", 0.1, 1, false, 0, 3, false, "default 3"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var m matrix
			const calls = 1000.0
			m2 := 1
			if c.retried {
				m2 = c.maxAttempts
			}
			// Per call: 1 + p + … + p^(M−1) attempts, p + … + p^M of them
			// failed, p^M of the calls failed all.
			attempts, failed := 0.0, 0.0
			for k := 0; k < m2; k++ {
				attempts += math.Pow(c.p, float64(k))
				failed += math.Pow(c.p, float64(k+1))
			}
			exhausted := math.Pow(c.p, float64(m2))
			l, with, server := oneGRPCClient()
			for s := range 10 {
				m.add("grpc_client_attempt_started_total", l, s, calls*(attempts+c.internal), true)
				m.add("grpc_client_attempt_duration_seconds_count", with("OK"), s, calls*(1-exhausted-c.internal), true)
				m.add("grpc_client_attempt_duration_seconds_count", with("UNAVAILABLE"), s, calls*failed, true)
				m.add("grpc_client_attempt_duration_seconds_count", with("INTERNAL"), s, calls*c.internal, true)
				m.add("grpc_client_call_duration_seconds_count", with("OK"), s, calls*(1-exhausted-c.internal), true)
				m.add("grpc_client_call_duration_seconds_count", with("UNAVAILABLE"), s, calls*exhausted, true)
				m.add("grpc_client_call_duration_seconds_count", with("INTERNAL"), s, calls*c.internal, true)
				m.histogram("grpc_server_call_duration_seconds", server, s, []float64{0.02, 0.02, 0.02}, grpcBounds, 1, 'g')
			}
			r := fitGRPC(t, m.result())
			if r.MaxRetries.V != c.want || r.MaxRetries.Known != c.known || !strings.Contains(r.MaxRetries.Note, c.note) {
				t.Errorf("max_retries %v (known %v), want %v (known %v), with %q in %q", r.MaxRetries.V, r.MaxRetries.Known, c.want, c.known, c.note, r.MaxRetries.Note)
			}
			if strings.Contains(r.MaxRetries.Note, "INTERNAL") {
				t.Errorf("INTERNAL, never retried, taken as retried: %s", r.MaxRetries.Note)
			}
		})
	}
}

// oneGRPCClient are the labels of one gRPC client instance's series, a
// function adding a grpc_status to them, and the server's labels: the
// window the retry-policy tests write.
func oneGRPCClient() (client map[string]string, with func(status string) map[string]string, server map[string]string) {
	client = map[string]string{"job": "frontend", "instance": "10.0.0.1:9464", "grpc_method": "shop.Cart/Get", "grpc_target": "dns:///cart:443"}
	with = func(status string) map[string]string {
		out := map[string]string{"grpc_status": status}
		maps.Copy(out, client)
		return out
	}
	server = map[string]string{"job": "cart", "instance": "10.0.1.1:9464", "grpc_method": "shop.Cart/Get", "grpc_status": "OK"}
	return client, with, server
}
