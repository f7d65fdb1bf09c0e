package resilgrpc

import (
	"context"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/retrystorm/retrystorm/resil/resilgrpc/grpcconfig"
)

// equivConfig has a retryPolicy and a retryThrottling: maxTokens 10,
// threshold 5; tokenRatio 0.5, exact in binary, so that grpc-go's floating
// point and resil's thousandths count the same.
const equivConfig = `{
  "methodConfig": [{
    "name": [{"service": "grpc.testing.TestService"}],
    "retryPolicy": {"maxAttempts": 4, "initialBackoff": "0.15s", "maxBackoff": "0.6s",
                    "backoffMultiplier": 2, "retryableStatusCodes": ["UNAVAILABLE", "RESOURCE_EXHAUSTED"]}
  }],
  "retryThrottling": {"maxTokens": 10, "tokenRatio": 0.5}
}`

// equivScript is what the server answers, arrival by arrival, whoever
// calls: U UNAVAILABLE, R RESOURCE_EXHAUSTED (both retryable), P
// UNAVAILABLE with a pushback of 200ms, N UNAVAILABLE with a pushback that
// says no retry, D DATA_LOSS and I INVALID_ARGUMENT (not retryable, not
// counted by the throttle), O OK. Past its end, OK.
const equivScript = "PUUU" + "O" + "UN" + "U" + "D" + "I" + "OOOO" + "U" + "OOOO" + "RO" + "U"

// What the throttle makes of it, call by call (tokens from 10; a retryable
// failure takes 1, a success adds 0.5; no retry at or below 5): the first
// call runs out of attempts (4), the third is stopped by the pushback, the
// fourth, eleventh and seventeenth by the throttle.
var (
	equivAttempts = []int{4, 1, 2, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 1, 1, 1, 1}
	equivCodes    = []codes.Code{codes.Unavailable, codes.OK, codes.Unavailable, codes.Unavailable, codes.DataLoss,
		codes.InvalidArgument, codes.OK, codes.OK, codes.OK, codes.OK, codes.Unavailable, codes.OK, codes.OK, codes.OK,
		codes.OK, codes.OK, codes.Unavailable, codes.OK, codes.OK, codes.OK}
)

func scripted(script string) func(context.Context, int, *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
	return func(ctx context.Context, i int, _ *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
		c := byte('O')
		if i < len(script) {
			c = script[i]
		}
		switch c {
		case 'U':
			return nil, status.Error(codes.Unavailable, "down")
		case 'R':
			return nil, status.Error(codes.ResourceExhausted, "full")
		case 'P', 'N':
			ms := map[byte]string{'P': "200", 'N': "-1"}[c]
			_ = grpc.SetTrailer(ctx, metadata.Pairs(PushbackHeader, ms))
			return nil, status.Error(codes.Unavailable, "pushback")
		case 'D':
			return nil, status.Error(codes.DataLoss, "lost")
		case 'I':
			return nil, status.Error(codes.InvalidArgument, "bad")
		}
		return resp("ok"), nil
	}
}

// equivRun makes the calls one after another and returns, per call, the
// attempts and the final code, and the server's arrivals.
func equivRun(t *testing.T, s *server, tc testpb.TestServiceClient, calls int) ([]int, []codes.Code, []arrival) {
	t.Helper()
	var attempts []int
	var finals []codes.Code
	for range calls {
		before := len(s.seen())
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := tc.UnaryCall(ctx, req("x"))
		cancel()
		attempts = append(attempts, len(s.seen())-before)
		finals = append(finals, status.Code(err))
	}
	return attempts, finals, s.seen()
}

// TestEquivalentToGRPC runs one service config through grpc-go's built-in
// retries and through resilgrpc, against servers that answer the same
// script: the attempts of every call, the final codes, the codes retried,
// the point where the throttle stops retrying, the
// grpc-previous-rpc-attempts headers and the waits (within jitter and a
// tolerance for a loaded machine) must be the same.
func TestEquivalentToGRPC(t *testing.T) {
	calls := len(equivAttempts)

	native := startServer(t, &server{unary: scripted(equivScript)})
	ntc := dial(t, native, nil, grpc.WithDefaultServiceConfig(equivConfig))
	nAtt, nCodes, nArr := equivRun(t, native, ntc, calls)

	cfg, err := grpcconfig.Parse([]byte(equivConfig), grpcconfig.Options{})
	if err != nil {
		t.Fatal(err)
	}
	set, err := FromServiceConfig(cfg, ConfigOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ours := startServer(t, &server{unary: scripted(equivScript)})
	otc := dial(t, ours, mustClient(t, set))
	oAtt, oCodes, oArr := equivRun(t, ours, otc, calls)

	for _, r := range []struct {
		name     string
		attempts []int
		codes    []codes.Code
		arrivals []arrival
	}{{"grpc-go", nAtt, nCodes, nArr}, {"resilgrpc", oAtt, oCodes, oArr}} {
		if !slices.Equal(r.attempts, equivAttempts) {
			t.Errorf("%s: attempts per call %v, want %v", r.name, r.attempts, equivAttempts)
		}
		if !slices.Equal(r.codes, equivCodes) {
			t.Errorf("%s: codes %v, want %v", r.name, r.codes, equivCodes)
		}
	}
	if len(nArr) != len(oArr) {
		t.Fatalf("arrivals: grpc-go %d, resilgrpc %d", len(nArr), len(oArr))
	}
	for i := range nArr {
		if nArr[i].previous != oArr[i].previous {
			t.Errorf("arrival %d: grpc-previous-rpc-attempts %q under grpc-go, %q under resilgrpc", i, nArr[i].previous, oArr[i].previous)
		}
	}

	// The waits: the pushback's 200ms exactly, then the backoff restarts
	// at 150ms, then 300ms; each backoff within grpc-go's jitter of ±20%.
	// The margins tell a restarted backoff (120-180ms) from one that went
	// on (240-360ms).
	const slack = 50 * time.Millisecond // scheduling on a shared machine
	type wait struct {
		arrival int
		base    time.Duration
		exact   bool
	}
	const ms = time.Millisecond
	for _, w := range []wait{{1, 200 * ms, true}, {2, 150 * ms, false}, {3, 300 * ms, false}, {6, 150 * ms, false}, {20, 150 * ms, false}} {
		lo, hi := w.base*8/10, w.base*12/10+slack
		if w.exact {
			lo = w.base
		}
		for _, r := range []struct {
			name string
			arr  []arrival
		}{{"grpc-go", nArr}, {"resilgrpc", oArr}} {
			gap := r.arr[w.arrival].at.Sub(r.arr[w.arrival-1].at)
			if gap < lo-time.Millisecond || gap > hi {
				t.Errorf("%s: wait before arrival %d is %v, want [%v, %v]", r.name, w.arrival, gap, lo, hi)
			}
		}
	}
	if t.Failed() {
		t.Logf("grpc-go %v %v\nresilgrpc %v %v", nAtt, nCodes, oAtt, oCodes)
	}
}
