package resilgrpc

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"

	"github.com/retrystorm/retrystorm/resil"
	"github.com/retrystorm/retrystorm/resil/budget"
)

// seenAttempts records what an inner interceptor reads with AttemptOf.
type seenAttempts struct {
	mu sync.Mutex
	a  []resil.Attempt
	ok []bool
}

func (s *seenAttempts) add(ctx context.Context) {
	a, ok := AttemptOf(ctx)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.a = append(s.a, a)
	s.ok = append(s.ok, ok)
}

func (s *seenAttempts) kinds() []resil.Kind {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []resil.Kind
	for i, a := range s.a {
		if !s.ok[i] {
			return nil
		}
		out = append(out, a.Kind)
	}
	return out
}

func (s *seenAttempts) unary() grpc.DialOption {
	return grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		s.add(ctx)
		return invoker(ctx, method, req, reply, cc, opts...)
	})
}

func (s *seenAttempts) stream() grpc.DialOption {
	return grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		s.add(ctx)
		return streamer(ctx, desc, cc, method, opts...)
	})
}

// dialInner connects to s through the Client's interceptors and then
// inner's: the Client's options come first, so its interceptors are the
// outer ones.
func dialInner(t *testing.T, s *server, c *Client, inner grpc.DialOption) testpb.TestServiceClient {
	t.Helper()
	return dial(t, s, nil, append(c.DialOptions(), inner)...)
}

// TestAttemptOf: an interceptor installed after the Client's sees every
// attempt on the wire with its number, kind and key: retries of unary
// calls and streams, and hedges. A call that failed tells resil.ReasonOf
// why the Guard stopped.
func TestAttemptOf(t *testing.T) {
	t.Run("retries", func(t *testing.T) {
		s := startServer(t, &server{unary: failFirst(2)})
		var seen seenAttempts
		tc := dialInner(t, s, mustClient(t, ClientSettings{Default: Method{Guard: retrying(t, &waitClock{}, 3, nil)}}), seen.unary())
		if _, err := tc.UnaryCall(context.Background(), req("x"), WithKey("k1")); err != nil {
			t.Fatal(err)
		}
		want := []resil.Attempt{{Number: 1, Kind: resil.KindFirst, Key: "k1"}, {Number: 2, Kind: resil.KindRetry, Key: "k1"}, {Number: 3, Kind: resil.KindRetry, Key: "k1"}}
		if !slices.Equal(seen.a, want) || slices.Contains(seen.ok, false) {
			t.Errorf("attempts %+v (found %v), want %+v", seen.a, seen.ok, want)
		}
	})
	t.Run("hedge", func(t *testing.T) {
		s := startServer(t, &server{unary: func(ctx context.Context, i int, _ *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
			if i == 0 {
				<-ctx.Done()
				return nil, status.FromContextError(ctx.Err()).Err()
			}
			return resp("hedge"), nil
		}})
		budget, _ := budget.NewTokenBucket(budget.TokenBucketSettings{Ratio: 0.1, Funding: budget.FundedByRequest, MinTokens: 3})
		g := mustGuard(t, resil.GuardSettings{Idempotency: resil.Idempotent,
			Policy: resil.Policy{Budget: budget, Hedge: resil.HedgeSettings{Delay: 20 * time.Millisecond}}})
		var seen seenAttempts
		tc := dialInner(t, s, mustClient(t, ClientSettings{Default: Method{Guard: g}}), seen.unary())
		if _, err := tc.UnaryCall(context.Background(), req("x")); err != nil {
			t.Fatal(err)
		}
		wctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := g.Wait(wctx); err != nil {
			t.Fatal(err)
		}
		if k := seen.kinds(); !slices.Equal(k, []resil.Kind{resil.KindFirst, resil.KindHedge}) {
			t.Errorf("kinds %v, want first then hedge", k)
		}
	})
	t.Run("stream", func(t *testing.T) {
		s := startServer(t, &server{output: func(n int, r *testpb.StreamingOutputCallRequest, st grpc.ServerStreamingServer[testpb.StreamingOutputCallResponse]) error {
			if n < 1 {
				return unavailable
			}
			return st.Send(outResp("ok"))
		}})
		var seen seenAttempts
		tc := dialInner(t, s, mustClient(t, ClientSettings{Default: Method{Guard: retrying(t, &waitClock{}, 3, nil)}}), seen.stream())
		st, err := tc.StreamingOutputCall(context.Background(), outReq("m"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := recvAll(st); err != nil {
			t.Fatal(err)
		}
		if k := seen.kinds(); !slices.Equal(k, []resil.Kind{resil.KindFirst, resil.KindRetry}) {
			t.Errorf("kinds %v, want first then retry", k)
		}
	})
	t.Run("stop reasons", func(t *testing.T) {
		for _, c := range []struct {
			name    string
			err     error
			retries int
			want    resil.StopReason
		}{
			{"retries exhausted", unavailable, 2, resil.StopRetriesExhausted},
			{"not retryable", status.Error(codes.Internal, "boom"), 2, resil.StopNotRetryable},
			{"no retries", unavailable, 0, resil.StopRetriesExhausted},
		} {
			s := startServer(t, &server{unary: func(context.Context, int, *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
				return nil, c.err
			}})
			tc := dial(t, s, mustClient(t, ClientSettings{Default: Method{Guard: retrying(t, &waitClock{}, c.retries, nil)}}))
			_, err := tc.UnaryCall(context.Background(), req("x"))
			if got := resil.ReasonOf(err); got != c.want || status.Code(err) != status.Code(c.err) {
				t.Errorf("%s: ReasonOf %v, code %v; want %v, %v", c.name, got, status.Code(err), c.want, status.Code(c.err))
			}
		}
	})
	if _, ok := AttemptOf(context.Background()); ok {
		t.Error("AttemptOf found an attempt on a context no Client made")
	}
}
