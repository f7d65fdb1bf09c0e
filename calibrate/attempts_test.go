package calibrate_test

import (
	"strings"
	"testing"
)

// TestGRPCAttemptsBounded: the attempts a call gets, estimated from the
// calls that failed every attempt, are bounded above by gRPC's own cap
// and below by the attempts per call the window shows. gRFC A6 caps
// maxAttempts at 5; grpc-go v1.85.0 does so in service_config.go
// (convertRetryPolicy takes the lesser of the policy's maxAttempts and
// the channel's) with dialoptions.go's defaultMaxCallAttempts = 5. An
// estimate that contradicts the attempts per call is not used: the
// default is written, and the note says why.
func TestGRPCAttemptsBounded(t *testing.T) {
	for _, c := range []struct {
		name string
		// Over the window: calls, attempts per call, the share p of the
		// attempts failing UNAVAILABLE, the calls that failed every one.
		calls, perCall, p, exhausted float64
		want                         float64 // max_retries written
		known                        bool
		note                         string
	}{
		// 0.9^M = 0.01 gives M = 43.7: more than any gRPC client makes.
		{"over the cap", 1900, 4.5, 0.9, 19, 4, true, "taken as 5: gRPC clients treat a maxAttempts over 5 as 5"},
		// The same, with 6 attempts a call: more than the cap allows.
		{"more attempts a call than the cap", 1900, 6, 0.9, 19, 3, false, "the window shows 6 attempts a call, more than 5: the failures were not independent"},
		// 0.5^M = 0.25 gives M = 2, but calls made 2.5 attempts each.
		{"fewer than the attempts a call", 1000, 2.5, 0.5, 250, 3, false, "the window shows 2.5 attempts a call, more than 2"},
		// Consistent: 0.5^3, 1.75 attempts a call.
		{"consistent", 1000, 1.75, 0.5, 125, 2, true, "M = 3.00"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var m matrix
			l, with, server := oneGRPCClient()
			const steps = 10
			calls, attempts := c.calls/steps, c.calls*c.perCall/steps
			for s := range steps {
				m.add("grpc_client_attempt_started_total", l, s, attempts, true)
				m.add("grpc_client_attempt_duration_seconds_count", with("OK"), s, attempts*(1-c.p), true)
				m.add("grpc_client_attempt_duration_seconds_count", with("UNAVAILABLE"), s, attempts*c.p, true)
				m.add("grpc_client_call_duration_seconds_count", with("OK"), s, calls-c.exhausted/steps, true)
				m.add("grpc_client_call_duration_seconds_count", with("UNAVAILABLE"), s, c.exhausted/steps, true)
				m.histogram("grpc_server_call_duration_seconds", server, s, []float64{0.02, 0.02, 0.02}, grpcBounds, 1, 'g')
			}
			r := fitGRPC(t, m.result())
			if r.MaxRetries.V != c.want || r.MaxRetries.Known != c.known || !strings.Contains(r.MaxRetries.Note, c.note) {
				t.Errorf("max_retries %v (known %v), want %v (known %v), with %q in %q", r.MaxRetries.V, r.MaxRetries.Known, c.want, c.known, c.note, r.MaxRetries.Note)
			}
		})
	}
}
