package resilgrpc

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/retrystorm/retrystorm/resil"
	"github.com/retrystorm/retrystorm/resil/budget"
)

var unavailable = status.Error(codes.Unavailable, "try again")

// failFirst answers UNAVAILABLE to the first n arrivals, then OK with the
// arrival's index.
func failFirst(n int) func(context.Context, int, *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
	return func(_ context.Context, i int, _ *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
		if i < n {
			return nil, unavailable
		}
		return resp(strconv.Itoa(i)), nil
	}
}

func retrying(t *testing.T, clk resil.Clock, retries int, b resil.Budget) *resil.Guard {
	return mustGuard(t, resil.GuardSettings{Idempotency: resil.Idempotent, Clock: clk,
		Policy: resil.Policy{MaxRetries: retries, Budget: b,
			Backoff: resil.Backoff{Schedule: resil.Fixed, Base: 10 * time.Millisecond}}})
}

// TestUnaryRetries: UNAVAILABLE is retried; each retry tells the server how
// many attempts came before it; the caller gets the answer that worked.
func TestUnaryRetries(t *testing.T) {
	s := startServer(t, &server{unary: failFirst(2)})
	clk := &waitClock{}
	g := retrying(t, clk, 3, nil)
	tc := dial(t, s, mustClient(t, ClientSettings{Default: Method{Guard: g}}))
	out, err := tc.UnaryCall(context.Background(), req("x"))
	if err != nil || out.GetServerId() != "2" {
		t.Fatalf("reply %v, err %v; want the third attempt's", out, err)
	}
	var prev []string
	for _, a := range s.seen() {
		prev = append(prev, a.previous)
	}
	if !slices.Equal(prev, []string{"", "1", "2"}) {
		t.Errorf("grpc-previous-rpc-attempts = %q", prev)
	}
	if w := clk.Waits(); !slices.Equal(w, []time.Duration{10 * time.Millisecond, 10 * time.Millisecond}) {
		t.Errorf("backoff waits %v", w)
	}
	if st := g.Stats(); st.Retries != 2 || st.Attempts != 3 {
		t.Errorf("stats %+v", st)
	}
}

// TestUnaryCodes checks how each kind of status counts and whether it is
// retried, and that the caller sees the server's status unchanged.
func TestUnaryCodes(t *testing.T) {
	for _, c := range []struct {
		name     string
		m        Method
		err      error
		attempts int
		outcome  resil.Outcome
		reason   error
	}{
		{"unavailable is retried", Method{}, unavailable, 3, resil.OutcomeFailure, resil.ErrRetriesExhausted},
		// What is not retried does not count against the breaker by
		// default (issue 27, item 11): INTERNAL is neutral, as gRFC A6's
		// throttle counts it; ServerFailureCodes counts it again.
		{"internal is neutral, not retried", Method{}, status.Error(codes.Internal, "boom"), 1, resil.OutcomeIgnored, resil.ErrNotRetryable},
		{"server failure codes count internal", Method{FailureCodes: ServerFailureCodes}, status.Error(codes.Internal, "boom"), 1, resil.OutcomeFailure, resil.ErrNotRetryable},
		{"invalid argument is neutral", Method{}, status.Error(codes.InvalidArgument, "bad"), 1, resil.OutcomeIgnored, resil.ErrNotRetryable},
		{"not found is neutral", Method{}, status.Error(codes.NotFound, "none"), 1, resil.OutcomeIgnored, resil.ErrNotRetryable},
		{"retry codes are configurable", Method{RetryCodes: []codes.Code{codes.Aborted}}, status.Error(codes.Aborted, "x"), 3, resil.OutcomeFailure, resil.ErrRetriesExhausted},
		{"then unavailable is neutral", Method{RetryCodes: []codes.Code{codes.Aborted}}, unavailable, 1, resil.OutcomeIgnored, resil.ErrNotRetryable},
		{"failure codes are configurable", Method{FailureCodes: []codes.Code{codes.Unavailable}, RetryCodes: []codes.Code{codes.Aborted}}, unavailable, 1, resil.OutcomeFailure, resil.ErrNotRetryable},
		{"a server's own deadline may be retried", Method{RetryCodes: []codes.Code{codes.DeadlineExceeded}}, status.Error(codes.DeadlineExceeded, "downstream"), 3, resil.OutcomeTimeout, resil.ErrRetriesExhausted},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := startServer(t, &server{unary: func(context.Context, int, *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
				return nil, c.err
			}})
			m := c.m
			m.Guard = retrying(t, &waitClock{}, 2, nil)
			ev := watch(m.Guard)
			tc := dial(t, s, mustClient(t, ClientSettings{Default: m}))
			_, err := tc.UnaryCall(context.Background(), req("x"))
			want := status.Convert(c.err)
			if got := status.Convert(err); got.Code() != want.Code() || got.Message() != want.Message() {
				t.Errorf("status %v, want %v", got, want)
			}
			if !errors.Is(err, c.reason) {
				t.Errorf("err %v does not wrap %v", err, c.reason)
			}
			if n := len(s.seen()); n != c.attempts {
				t.Errorf("%d attempts, want %d", n, c.attempts)
			}
			if o := ev.outcomes(); len(o) == 0 || o[0] != c.outcome {
				t.Errorf("outcomes %v, want %v", o, c.outcome)
			}
		})
	}
}

// pushbackServer answers UNAVAILABLE with the given pushback trailers to
// the first n arrivals.
func pushbackServer(n int, values ...string) *server {
	return &server{unary: func(ctx context.Context, i int, _ *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
		if i >= n {
			return resp("ok"), nil
		}
		md := metadata.MD{}
		for _, v := range values {
			md.Append(PushbackHeader, v)
		}
		_ = grpc.SetTrailer(ctx, md)
		return nil, unavailable
	}}
}

// TestPushback: grpc-retry-pushback-ms replaces the backoff and is paid from
// the budget; a negative, malformed or repeated one stops the retries
// (gRFC A6).
func TestPushback(t *testing.T) {
	for _, c := range []struct {
		name     string
		values   []string
		waits    []time.Duration
		attempts int
		reason   error
	}{
		{"honoured", []string{"300"}, []time.Duration{300 * time.Millisecond}, 2, nil},
		{"zero is at once", []string{"0"}, []time.Duration{time.Nanosecond}, 2, nil},
		{"negative stops", []string{"-1"}, nil, 1, resil.ErrPushback},
		{"malformed stops", []string{"soon"}, nil, 1, resil.ErrPushback},
		{"repeated stops", []string{"10", "20"}, nil, 1, resil.ErrPushback},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := startServer(t, pushbackServer(1, c.values...))
			budget, _ := budget.NewTokenBucket(budget.TokenBucketSettings{Ratio: 0.1, Funding: budget.FundedByRequest, MinTokens: 5})
			clk := &waitClock{}
			g := retrying(t, clk, 3, budget)
			tc := dial(t, s, mustClient(t, ClientSettings{Default: Method{Guard: g}}))
			_, err := tc.UnaryCall(context.Background(), req("x"))
			if c.reason == nil && err != nil || c.reason != nil && !errors.Is(err, c.reason) {
				t.Fatalf("err %v, want %v", err, c.reason)
			}
			if n := len(s.seen()); n != c.attempts {
				t.Errorf("%d attempts, want %d", n, c.attempts)
			}
			if w := clk.Waits(); !slices.Equal(w, c.waits) {
				t.Errorf("waits %v, want %v", w, c.waits)
			}
			paid := 5.1 - budget.Tokens(time.Now()) // 5 + one deposit of 0.1
			if want := float64(c.attempts - 1); paid < want-1e-9 || paid > want+1e-9 {
				t.Errorf("budget paid %v, want %v", paid, want)
			}
		})
	}
}

// TestUnaryCommitted: a call whose headers arrived before its error is
// committed and never retried (gRFC A6), though it counts as a failure.
func TestUnaryCommitted(t *testing.T) {
	s := startServer(t, &server{unary: func(ctx context.Context, i int, _ *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
		_ = grpc.SendHeader(ctx, metadata.Pairs("x-started", "yes"))
		return nil, unavailable
	}})
	g := retrying(t, &waitClock{}, 3, nil)
	ev := watch(g)
	tc := dial(t, s, mustClient(t, ClientSettings{Default: Method{Guard: g}}))
	_, err := tc.UnaryCall(context.Background(), req("x"))
	if status.Code(err) != codes.Unavailable || !errors.Is(err, resil.ErrNotRetryable) {
		t.Fatalf("err %v", err)
	}
	if n := len(s.seen()); n != 1 {
		t.Errorf("%d attempts after the headers came; want 1", n)
	}
	if o := ev.outcomes(); !slices.Equal(o, []resil.Outcome{resil.OutcomeFailure}) {
		t.Errorf("outcomes %v", o)
	}
}

// TestCallerDeadline: DEADLINE_EXCEEDED of the caller's own deadline is
// never retried; one made by a per-attempt timeout is.
func TestCallerDeadline(t *testing.T) {
	slow := func(ctx context.Context, i int, _ *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
		<-ctx.Done()
		return nil, status.FromContextError(ctx.Err()).Err()
	}
	retryDeadline := []codes.Code{codes.Unavailable, codes.DeadlineExceeded}
	t.Run("own deadline", func(t *testing.T) {
		s := startServer(t, &server{unary: slow})
		g := retrying(t, nil, 3, nil)
		tc := dial(t, s, mustClient(t, ClientSettings{Default: Method{Guard: g, RetryCodes: retryDeadline}}))
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		_, err := tc.UnaryCall(ctx, req("x"))
		if status.Code(err) != codes.DeadlineExceeded {
			t.Fatalf("err %v", err)
		}
		if n := len(s.seen()); n != 1 {
			t.Errorf("%d attempts; the caller's own deadline must not be retried", n)
		}
	})
	t.Run("the server says the caller's deadline is too near", func(t *testing.T) {
		// The server judged the propagated deadline (its clock may run
		// ahead): the caller's context is not done yet, but the deadline
		// is its own, so no retry can make it.
		s := startServer(t, &server{unary: func(context.Context, int, *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
			return nil, status.Error(codes.DeadlineExceeded, "too late")
		}})
		g := retrying(t, &waitClock{}, 3, nil)
		tc := dial(t, s, mustClient(t, ClientSettings{Default: Method{Guard: g, RetryCodes: retryDeadline}}))
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, err := tc.UnaryCall(ctx, req("x"))
		if status.Code(err) != codes.DeadlineExceeded || !errors.Is(err, resil.ErrNotRetryable) {
			t.Fatalf("err %v", err)
		}
		if n := len(s.seen()); n != 1 {
			t.Errorf("%d attempts; the caller's own deadline must not be retried", n)
		}
	})
	t.Run("per-attempt timeout", func(t *testing.T) {
		s := startServer(t, &server{unary: func(ctx context.Context, i int, r *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
			if i == 0 {
				return slow(ctx, i, r)
			}
			return resp("fast"), nil
		}})
		g := mustGuard(t, resil.GuardSettings{Idempotency: resil.Idempotent, AttemptTimeout: 50 * time.Millisecond,
			Policy: resil.Policy{MaxRetries: 2}})
		tc := dial(t, s, mustClient(t, ClientSettings{Default: Method{Guard: g}}))
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		out, err := tc.UnaryCall(ctx, req("x"))
		if err != nil || out.GetServerId() != "fast" {
			t.Fatalf("reply %v, err %v; want the retry's", out, err)
		}
	})
	t.Run("method timeout bounds the call", func(t *testing.T) {
		s := startServer(t, &server{unary: slow})
		g := mustGuard(t, resil.GuardSettings{Idempotency: resil.Idempotent, AttemptTimeout: 30 * time.Millisecond,
			Policy: resil.Policy{MaxRetries: 100, Backoff: resil.Backoff{Schedule: resil.Fixed, Base: time.Millisecond}}})
		tc := dial(t, s, mustClient(t, ClientSettings{Default: Method{Guard: g, Timeout: 300 * time.Millisecond}}))
		tc.EmptyCall(context.Background(), &testpb.Empty{}) // connected: the attempts are the server's
		start := time.Now()
		_, err := tc.UnaryCall(context.Background(), req("x"))
		if took := time.Since(start); took > 3*time.Second {
			t.Errorf("the call took %v past its method's timeout", took)
		}
		if c := status.Code(err); c != codes.DeadlineExceeded {
			t.Errorf("err %v, want DEADLINE_EXCEEDED", err)
		}
		if n := len(s.seen()); n < 2 || n > 11 {
			t.Errorf("%d attempts in 300ms of 30ms each", n)
		}
	})
}

// TestIdempotency: a call that is not idempotent is never retried blindly;
// per call options and keys decide.
func TestIdempotency(t *testing.T) {
	for _, c := range []struct {
		name     string
		method   resil.Idempotency
		opts     []grpc.CallOption
		attempts int
		key      string
	}{
		{"not idempotent", resil.NotIdempotent, nil, 1, ""},
		{"the call says idempotent", resil.NotIdempotent, []grpc.CallOption{Idempotent()}, 3, ""},
		{"the call has a key", resil.NotIdempotent, []grpc.CallOption{WithKey("k-1")}, 3, "k-1"},
		{"idempotent method", resil.Idempotent, nil, 3, ""},
		{"the call says not", resil.Idempotent, []grpc.CallOption{NotIdempotent()}, 1, ""},
		{"once", resil.Idempotent, []grpc.CallOption{Once()}, 1, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := startServer(t, &server{unary: failFirst(5)})
			g := mustGuard(t, resil.GuardSettings{Idempotency: resil.NotIdempotent, Clock: &waitClock{},
				Policy: resil.Policy{MaxRetries: 2}})
			tc := dial(t, s, mustClient(t, ClientSettings{Default: Method{Guard: g, Idempotency: c.method}}))
			_, err := tc.UnaryCall(context.Background(), req("x"), c.opts...)
			if status.Code(err) != codes.Unavailable {
				t.Fatalf("err %v", err)
			}
			seen := s.seen()
			if len(seen) != c.attempts {
				t.Fatalf("%d attempts, want %d", len(seen), c.attempts)
			}
			for _, a := range seen {
				if a.key != c.key {
					t.Errorf("key %q, want %q on every attempt", a.key, c.key)
				}
			}
			if c.attempts == 1 && c.method == resil.NotIdempotent && !errors.Is(err, resil.ErrNotIdempotent) {
				t.Errorf("err %v does not say why", err)
			}
		})
	}
}

// TestMethods: a call takes its method's entry, then its service's, then
// the default; a method no entry guards passes through.
func TestMethods(t *testing.T) {
	s := startServer(t, &server{unary: failFirst(1000)})
	g := func(n int) *resil.Guard { return retrying(t, &waitClock{}, n, nil) }
	svc := "/grpc.testing.TestService/"
	for _, c := range []struct {
		name string
		set  ClientSettings
		want int
	}{
		{"method entry", ClientSettings{Default: Method{Guard: g(1)}, Methods: map[string]Method{svc + "UnaryCall": {Guard: g(4)}, svc: {Guard: g(2)}}}, 5},
		{"service entry", ClientSettings{Default: Method{Guard: g(1)}, Methods: map[string]Method{svc: {Guard: g(2)}}}, 3},
		{"default", ClientSettings{Default: Method{Guard: g(1)}, Methods: map[string]Method{"/other.S/": {Guard: g(2)}}}, 2},
		{"unguarded", ClientSettings{Methods: map[string]Method{"/other.S/": {Guard: g(2)}}}, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := len(s.seen())
			tc := dial(t, s, mustClient(t, c.set))
			tc.UnaryCall(context.Background(), req("x"))
			if n := len(s.seen()) - before; n != c.want {
				t.Errorf("%d attempts, want %d", n, c.want)
			}
		})
	}
}

func TestNewClientErrors(t *testing.T) {
	g := retrying(t, nil, 1, nil)
	for _, c := range []struct {
		name string
		s    ClientSettings
	}{
		{"method without guard", ClientSettings{Methods: map[string]Method{"/a.A/B": {}}}},
		{"bad method name", ClientSettings{Methods: map[string]Method{"a.A/B": {Guard: g}}}},
		{"default without guard", ClientSettings{Default: Method{Timeout: time.Second}}},
		{"negative timeout", ClientSettings{Default: Method{Guard: g, Timeout: -1}}},
		{"OK retried", ClientSettings{Default: Method{Guard: g, RetryCodes: []codes.Code{codes.OK}}}},
		{"reserved key header", ClientSettings{KeyHeader: "grpc-key"}},
		{"negative replay limit", ClientSettings{ReplayLimit: -1}},
	} {
		if _, err := NewClient(c.s); err == nil {
			t.Errorf("%s: accepted", c.name)
		}
	}
}

// TestBreakerAndFallback: an open breaker refuses at once with UNAVAILABLE
// (errors.Is ErrBreakerOpen), or the method's fallback answers.
func TestBreakerAndFallback(t *testing.T) {
	s := startServer(t, &server{unary: failFirst(1000)})
	br, _ := resil.NewBreaker(resil.BreakerSettings{Threshold: 2, Cooldown: time.Minute})
	g := mustGuard(t, resil.GuardSettings{Idempotency: resil.Idempotent, Policy: resil.Policy{Breaker: br}})
	var fell atomic.Int32
	tc := dial(t, s, mustClient(t, ClientSettings{
		Default: Method{Guard: g},
		Methods: map[string]Method{"/grpc.testing.TestService/UnaryCall": {Guard: g,
			Fallback: func(ctx context.Context, method string, req, reply any, err error) error {
				if !errors.Is(err, resil.ErrBreakerOpen) {
					t.Errorf("fallback given %v", err)
				}
				fell.Add(1)
				reply.(*testpb.SimpleResponse).ServerId = "fallback"
				return nil
			}}},
	}))
	for range 2 {
		tc.UnaryCall(context.Background(), req("x"))
	}
	out, err := tc.UnaryCall(context.Background(), req("x"))
	if err != nil || out.GetServerId() != "fallback" || fell.Load() != 1 {
		t.Fatalf("reply %v, err %v: want the fallback's", out, err)
	}
	_, err = tc.EmptyCall(context.Background(), &testpb.Empty{})
	if status.Code(err) != codes.Unavailable || !errors.Is(err, resil.ErrBreakerOpen) {
		t.Fatalf("refusal %v", err)
	}
	if n := len(s.seen()); n != 2 {
		t.Errorf("%d calls reached the server through an open breaker", n-2)
	}
}

// TestBudgetExhausted: when the budget refuses, the caller gets the last
// status, and errors.Is tells why.
func TestBudgetExhausted(t *testing.T) {
	s := startServer(t, &server{unary: failFirst(1000)})
	budget, _ := budget.NewTokenBucket(budget.TokenBucketSettings{Ratio: 0.1, Funding: budget.FundedByRequest, MinTokens: 1})
	g := retrying(t, &waitClock{}, 3, budget)
	tc := dial(t, s, mustClient(t, ClientSettings{Default: Method{Guard: g}}))
	_, err := tc.UnaryCall(context.Background(), req("x"))
	if status.Code(err) != codes.Unavailable || !errors.Is(err, resil.ErrBudgetExhausted) {
		t.Fatalf("err %v", err)
	}
	if n := len(s.seen()); n != 2 {
		t.Errorf("%d attempts with one token", n)
	}
}

// TestCallerCancels: a caller who gives up during the backoff gets
// CANCELLED, and nothing more is sent.
func TestCallerCancels(t *testing.T) {
	s := startServer(t, &server{unary: failFirst(1000)})
	g := mustGuard(t, resil.GuardSettings{Idempotency: resil.Idempotent,
		Policy: resil.Policy{MaxRetries: 3, Backoff: resil.Backoff{Schedule: resil.Fixed, Base: time.Hour}}})
	tc := dial(t, s, mustClient(t, ClientSettings{Default: Method{Guard: g}}))
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	_, err := tc.UnaryCall(ctx, req("x"))
	if status.Code(err) != codes.Canceled || !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v", err)
	}
	if n := len(s.seen()); n != 1 {
		t.Errorf("%d attempts", n)
	}
}

// TestHedge: a slow first attempt is hedged; the hedge's answer is the
// caller's, and the slow attempt is cancelled at the server.
func TestHedge(t *testing.T) {
	cancelled := make(chan struct{})
	s := startServer(t, &server{unary: func(ctx context.Context, i int, _ *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
		if i == 0 {
			<-ctx.Done()
			close(cancelled)
			return nil, status.FromContextError(ctx.Err()).Err()
		}
		return &testpb.SimpleResponse{ServerId: "hedge", Hostname: "h"}, nil
	}})
	budget, _ := budget.NewTokenBucket(budget.TokenBucketSettings{Ratio: 0.1, Funding: budget.FundedByRequest, MinTokens: 3})
	g := mustGuard(t, resil.GuardSettings{Idempotency: resil.Idempotent,
		Policy: resil.Policy{Budget: budget, Hedge: resil.HedgeSettings{Delay: 30 * time.Millisecond}}})
	ev := watch(g)
	tc := dial(t, s, mustClient(t, ClientSettings{Default: Method{Guard: g}}))
	out, err := tc.UnaryCall(context.Background(), req("x"))
	if err != nil || out.GetServerId() != "hedge" || out.GetHostname() != "h" {
		t.Fatalf("reply %v, err %v; want the hedge's", out, err)
	}
	select {
	case <-cancelled:
	case <-time.After(5 * time.Second):
		t.Fatal("the losing attempt was not cancelled at the server")
	}
	seen := s.seen()
	if len(seen) != 2 || seen[1].previous != "1" {
		t.Errorf("arrivals %+v", seen)
	}
	if paid := 3.1 - budget.Tokens(time.Now()); paid < 0.999 || paid > 1.001 {
		t.Errorf("the hedge paid %v", paid)
	}
	// The call returned at the winner; the loser settles in the background.
	wctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := g.Wait(wctx); err != nil {
		t.Fatalf("the losing attempt did not settle: %v", err)
	}
	o := ev.outcomes()
	slices.Sort(o)
	if !slices.Equal(o, []resil.Outcome{resil.OutcomeSuccess, resil.OutcomeIgnored}) {
		t.Errorf("outcomes %v: the hedge succeeded, the loser was cancelled", o)
	}
}

// TestProtoIdempotency reads the idempotency of registered methods.
func TestProtoIdempotency(t *testing.T) {
	if i, ok := ProtoIdempotency("/grpc.testing.TestService/UnaryCall"); !ok || i != resil.NotIdempotent {
		t.Errorf("UnaryCall: %v, %v; it declares no idempotency level", i, ok)
	}
	for _, m := range []string{"/no.Such/Method", "/grpc.testing.TestService/Nope", "garbage", "/grpc.testing.SimpleRequest/X"} {
		if _, ok := ProtoIdempotency(m); ok {
			t.Errorf("%s found", m)
		}
	}
}
