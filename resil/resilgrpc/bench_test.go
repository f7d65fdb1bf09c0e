package resilgrpc

import (
	"context"
	"syscall"
	"testing"

	"google.golang.org/grpc"
	testpb "google.golang.org/grpc/interop/grpc_testing"

	"github.com/retrystorm/retrystorm/resil"
	"github.com/retrystorm/retrystorm/resil/budget"
	"github.com/retrystorm/retrystorm/resil/resilgrpc/grpcconfig"
)

// benchConfig is the service config both retry implementations run: the
// same attempts, backoff and throttle. The backoff is a microsecond, so that
// a retry's cost is the machinery's, not the wait's.
const benchConfig = `{"methodConfig": [{"name": [{"service": "grpc.testing.TestService"}],
  "retryPolicy": {"maxAttempts": 3, "initialBackoff": "0.000001s", "maxBackoff": "0.000001s",
                  "backoffMultiplier": 1, "retryableStatusCodes": ["UNAVAILABLE"]}}],
  "retryThrottling": {"maxTokens": 1000, "tokenRatio": 1}}`

// BenchmarkUnary measures a unary call over loopback, side by side: plain
// gRPC, gRPC's built-in retries under benchConfig, resilgrpc under the
// same config, and resilgrpc with a retry budget and a breaker. "ok" calls
// succeed at once; "retry" calls fail once with UNAVAILABLE and succeed on
// the retry.
func BenchmarkUnary(b *testing.B) {
	cfg, err := grpcconfig.Parse([]byte(benchConfig), grpcconfig.Options{})
	if err != nil {
		b.Fatal(err)
	}
	fromConfig := func(b *testing.B) *Client {
		set, err := FromServiceConfig(cfg, ConfigOptions{})
		if err != nil {
			b.Fatal(err)
		}
		return mustClient(b, set)
	}
	budgeted := func(b *testing.B) *Client {
		budget, _ := budget.NewTokenBucket(budget.TokenBucketSettings{Ratio: 1, Funding: budget.FundedByRequest, MinTokens: 100})
		breaker, _ := resil.NewBreaker(resil.BreakerSettings{Threshold: 1000})
		set, err := FromServiceConfig(cfg, ConfigOptions{Guard: resil.GuardSettings{Policy: resil.Policy{Budget: budget, Breaker: breaker}}})
		if err != nil {
			b.Fatal(err)
		}
		return mustClient(b, set)
	}
	for _, mode := range []string{"ok", "retry"} {
		for _, c := range []struct {
			name   string
			client func(*testing.B) *Client
			opts   []grpc.DialOption
		}{
			{"plain", nil, []grpc.DialOption{grpc.WithDisableRetry()}},
			{"grpc-retry", nil, []grpc.DialOption{grpc.WithDefaultServiceConfig(benchConfig)}},
			{"resilgrpc", fromConfig, nil},
			{"resilgrpc-budget", budgeted, nil},
		} {
			if mode == "retry" && c.name == "plain" {
				continue
			}
			b.Run(mode+"/"+c.name, func(b *testing.B) {
				unary := failFirst(0)
				if mode == "retry" {
					unary = func(ctx context.Context, i int, r *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
						if i%2 == 0 {
							return nil, unavailable
						}
						return resp("ok"), nil
					}
				}
				s := startServer(b, &server{unary: unary})
				var cl *Client
				if c.client != nil {
					cl = c.client(b)
				}
				tc := dial(b, s, cl, c.opts...)
				ctx := context.Background()
				rq := req("x")
				if _, err := tc.UnaryCall(ctx, rq); err != nil { // connect
					b.Fatal(err)
				}
				s.mu.Lock()
				s.arrivals = s.arrivals[:0]
				s.mu.Unlock()
				b.ReportAllocs()
				cpu := cpuTime()
				b.ResetTimer()
				for range b.N {
					if _, err := tc.UnaryCall(ctx, rq); err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer()
				b.ReportMetric(float64(len(s.seen()))/float64(b.N), "attempts/op")
				// The process's CPU time (client and server both run here):
				// steadier than wall time on a shared machine.
				b.ReportMetric(float64(cpuTime()-cpu)/float64(b.N), "cpu-ns/op")
			})
		}
	}
}

// cpuTime is the process's user and system CPU time, in nanoseconds.
func cpuTime() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
