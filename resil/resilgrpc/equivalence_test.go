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

	"github.com/retrystorm/retrystorm/resil"
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
// grpc-previous-rpc-attempts headers must be the same; resil's planned
// waits must be grpc-go's formula, and both clients' real waits within
// jitter and a tolerance for a loaded machine.
func TestEquivalentToGRPC(t *testing.T) {
	calls := len(equivAttempts)

	native := startServer(t, &server{unary: scripted(equivScript)})
	ntc := dial(t, native, nil, grpc.WithDefaultServiceConfig(equivConfig))
	nAtt, nCodes, nArr := equivRun(t, native, ntc, calls)

	cfg, err := grpcconfig.Parse([]byte(equivConfig), grpcconfig.Options{})
	if err != nil {
		t.Fatal(err)
	}
	clk := &planClock{}
	set, err := FromServiceConfig(cfg, ConfigOptions{Guard: resil.GuardSettings{Clock: clk}})
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

	// The waits resil planned, exactly: the pushback's 200ms, then the
	// backoff restarts at 150ms, then 300ms (not 300 then 600, had it gone
	// on counting); each backoff within grpc-go's jitter of ±20%.
	const ms = time.Millisecond
	plan := clk.Waits()
	want := []time.Duration{200 * ms, 150 * ms, 300 * ms, 150 * ms, 150 * ms}
	if len(plan) != len(want) {
		t.Fatalf("resilgrpc planned waits %v, want %d", plan, len(want))
	}
	for i, w := range want {
		lo, hi := w*8/10, w*12/10
		if i == 0 {
			lo, hi = w, w
		}
		if plan[i] < lo || plan[i] > hi {
			t.Errorf("resilgrpc's wait %d is %v, want [%v, %v]", i, plan[i], lo, hi)
		}
	}
	// And the waits both clients really took, between the server's
	// arrivals: at least what was planned (grpc-go's within its jitter),
	// and of the same order (the margin is for a loaded machine: a
	// scheduler can only make a wait longer).
	for k, n := range []int{1, 2, 3, 6, 20} {
		lo, hi := want[k]*8/10, want[k]*12/10+2*time.Second
		if k == 0 {
			lo = want[k]
		}
		for _, r := range []struct {
			name string
			arr  []arrival
		}{{"grpc-go", nArr}, {"resilgrpc", oArr}} {
			gap := r.arr[n].at.Sub(r.arr[n-1].at)
			if gap < lo-ms || gap > hi {
				t.Errorf("%s: wait before arrival %d is %v, want [%v, %v]", r.name, n, gap, lo, hi)
			}
		}
	}
	if t.Failed() {
		t.Logf("grpc-go %v %v\nresilgrpc %v %v", nAtt, nCodes, oAtt, oCodes)
	}
}
