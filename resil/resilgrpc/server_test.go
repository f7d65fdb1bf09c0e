package resilgrpc

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/retrystorm/retrystorm/resil"
	"github.com/retrystorm/retrystorm/resil/admission"
)

// TestServerSheds: a call whose deadline leaves less than its method needs
// is refused before the handler runs, with UNAVAILABLE and a pushback that
// stops the client's retries; calls with time enough, or no deadline, pass.
func TestServerSheds(t *testing.T) {
	var shed atomic.Int32
	sv, err := NewServer(ServerSettings{MinTime: 200 * time.Millisecond,
		MinTimes: map[string]time.Duration{"/grpc.testing.TestService/EmptyCall": 0},
		OnShed:   func(string, time.Duration) { shed.Add(1) }})
	if err != nil {
		t.Fatal(err)
	}
	var handled atomic.Int32
	s := startServer(t, &server{
		unary: func(context.Context, int, *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
			handled.Add(1)
			return resp("ok"), nil
		},
		output: func(n int, r *testpb.StreamingOutputCallRequest, st grpc.ServerStreamingServer[testpb.StreamingOutputCallResponse]) error {
			handled.Add(1)
			return st.Send(outResp("ok"))
		},
	}, sv.ServerOptions()...)
	g := retrying(t, &waitClock{}, 3, nil)
	tc := dial(t, s, mustClient(t, ClientSettings{Default: Method{Guard: g}}))

	short, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	var trailer metadata.MD
	_, err = tc.UnaryCall(short, req("x"), grpc.Trailer(&trailer))
	if status.Code(err) != codes.Unavailable || !errors.Is(err, resil.ErrPushback) {
		t.Fatalf("short deadline: %v; want UNAVAILABLE, and no retry", err)
	}
	if v := trailer.Get(PushbackHeader); len(v) != 1 || v[0] != "-1" {
		t.Errorf("pushback trailer %q", v)
	}
	st, err := tc.StreamingOutputCall(short, outReq("m"))
	if err == nil {
		_, err = recvAll(st)
	}
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("stream with a short deadline: %v", err)
	}
	if _, err := tc.UnaryCall(context.Background(), req("x")); err != nil {
		t.Fatalf("no deadline: %v", err)
	}
	long, cancel2 := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel2()
	if _, err := tc.UnaryCall(long, req("x")); err != nil {
		t.Fatalf("time enough: %v", err)
	}
	if handled.Load() != 2 || sv.Shed() != 2 || shed.Load() != 2 {
		t.Errorf("handled %d, shed %d (OnShed %d); want 2 and 2", handled.Load(), sv.Shed(), shed.Load())
	}
	if n := len(s.seen()); n != 2 {
		t.Errorf("%d calls reached the handlers", n)
	}
}

func TestNewServerErrors(t *testing.T) {
	for _, s := range []ServerSettings{
		{MinTime: -1},
		{MinTimes: map[string]time.Duration{"/a.A/B": -1}},
		{MinTimes: map[string]time.Duration{"nope": 1}},
		{Code: 99},
	} {
		if _, err := NewServer(s); err == nil {
			t.Errorf("%+v accepted", s)
		}
	}
}

// TestServerShedder: with a admission.Shedder the interceptors cap the calls
// in flight: a call over the limit is refused at once with UNAVAILABLE and
// the Shedder's RetryAfter as pushback, and every end is reported, a
// deadline passed in the handler as a drop.
func TestServerShedder(t *testing.T) {
	lim, _ := admission.NewLimiter(admission.FixedLimit{Limit: 1})
	// The handler stops half a second before its caller gives up: the
	// Shedder hears of the deadline it missed before the caller's
	// cancellation (20 ms of 50 were too few on a busy machine).
	sh, err := admission.NewShedder(admission.ShedderSettings{Limiter: lim, RetryAfter: 1500 * time.Millisecond,
		Deadline: admission.DeadlineSettings{Reserve: 500 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	sv, err := NewServer(ServerSettings{Shedder: sh})
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	entered := make(chan struct{}, 1)
	s := startServer(t, &server{
		unary: func(ctx context.Context, _ int, r *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
			switch string(r.GetPayload().GetBody()) {
			case "block":
				entered <- struct{}{}
				<-release
			case "outlive":
				<-ctx.Done()
				return nil, status.FromContextError(ctx.Err()).Err()
			}
			return resp("ok"), nil
		},
	}, sv.ServerOptions()...)
	tc := dial(t, s, nil)
	done := make(chan error, 1)
	go func() {
		_, err := tc.UnaryCall(context.Background(), req("block"))
		done <- err
	}()
	<-entered
	var trailer metadata.MD
	_, err = tc.UnaryCall(context.Background(), req("x"), grpc.Trailer(&trailer))
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("over the limit: %v; want UNAVAILABLE", err)
	}
	if v := trailer.Get(PushbackHeader); len(v) != 1 || v[0] != "1500" {
		t.Errorf("pushback trailer %q, want 1500", v)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if _, err := tc.UnaryCall(short, req("outlive")); status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("a call that outlives its deadline: %v", err)
	}
	// The server's side of that call ends a moment after the client's.
	for deadline := time.Now().Add(5 * time.Second); sh.Stats().InFlight > 0 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	st := sh.Stats()
	if st.Admitted != 2 || st.Shed[admission.ShedLimit] != 1 || st.Dropped != 1 || st.InFlight != 0 || sv.Shed() != 1 {
		t.Errorf("shedder stats %+v, server shed %d", st, sv.Shed())
	}
}

// TestServerHandlerDeadline: with a Shedder, unary and stream handlers
// run under the caller's deadline less the Shedder's Reserve, as
// resilhttp.Shed's do.
func TestServerHandlerDeadline(t *testing.T) {
	sh, err := admission.NewShedder(admission.ShedderSettings{Deadline: admission.DeadlineSettings{Reserve: 300 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	sv, err := NewServer(ServerSettings{Shedder: sh})
	if err != nil {
		t.Fatal(err)
	}
	left := make(chan time.Duration, 2)
	until := func(ctx context.Context) time.Duration {
		dl, ok := ctx.Deadline()
		if !ok {
			return -1
		}
		return time.Until(dl)
	}
	s := startServer(t, &server{
		unary: func(ctx context.Context, _ int, _ *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
			left <- until(ctx)
			return resp("ok"), nil
		},
		output: func(_ int, _ *testpb.StreamingOutputCallRequest, st grpc.ServerStreamingServer[testpb.StreamingOutputCallResponse]) error {
			left <- until(st.Context())
			return nil
		},
	}, sv.ServerOptions()...)
	tc := dial(t, s, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if _, err := tc.UnaryCall(ctx, req("x")); err != nil {
		t.Fatal(err)
	}
	st, err := tc.StreamingOutputCall(ctx, outReq("x"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := recvAll(st); err != nil {
		t.Fatal(err)
	}
	for _, what := range []string{"unary", "stream"} {
		if d := <-left; d > 700*time.Millisecond || d < 400*time.Millisecond {
			t.Errorf("%s handler: %v left, want just under the caller's 1s less the 300ms reserve", what, d)
		}
	}
}
