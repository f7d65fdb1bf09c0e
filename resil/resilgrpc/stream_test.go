package resilgrpc

import (
	"context"
	"errors"
	"io"
	"slices"
	"strconv"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/retrystorm/retrystorm/resil"
)

func outReq(body string) *testpb.StreamingOutputCallRequest {
	return &testpb.StreamingOutputCallRequest{Payload: &testpb.Payload{Body: []byte(body)}}
}

func outResp(body string) *testpb.StreamingOutputCallResponse {
	return &testpb.StreamingOutputCallResponse{Payload: &testpb.Payload{Body: []byte(body)}}
}

// recvAll reads a stream to its end.
func recvAll(s grpc.ServerStreamingClient[testpb.StreamingOutputCallResponse]) ([]string, error) {
	var got []string
	for {
		m, err := s.Recv()
		if err == io.EOF {
			return got, nil
		}
		if err != nil {
			return got, err
		}
		got = append(got, string(m.GetPayload().GetBody()))
	}
}

// TestStreamRetriedBeforeCommit: a server stream that fails before any
// response is retried, its request replayed; the caller sees only the
// attempt that worked.
func TestStreamRetriedBeforeCommit(t *testing.T) {
	s := startServer(t, &server{output: func(n int, r *testpb.StreamingOutputCallRequest, st grpc.ServerStreamingServer[testpb.StreamingOutputCallResponse]) error {
		if n < 2 {
			return unavailable
		}
		for i := range 3 {
			if err := st.Send(outResp(string(r.GetPayload().GetBody()) + strconv.Itoa(i))); err != nil {
				return err
			}
		}
		return nil
	}})
	g := retrying(t, &waitClock{}, 3, nil)
	tc := dial(t, s, mustClient(t, ClientSettings{Default: Method{Guard: g}}))
	st, err := tc.StreamingOutputCall(context.Background(), outReq("m"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := recvAll(st)
	if err != nil || !slices.Equal(got, []string{"m0", "m1", "m2"}) {
		t.Fatalf("got %v, %v", got, err)
	}
	seen := s.seen()
	if len(seen) != 3 {
		t.Fatalf("%d attempts, want 3", len(seen))
	}
	for i, a := range seen {
		if a.body != "m" || a.previous != []string{"", "1", "2"}[i] {
			t.Errorf("attempt %d: %+v; the request must be replayed", i, a)
		}
	}
	if st := g.Stats(); st.Retries != 2 || st.Intents != 1 {
		t.Errorf("stats %+v", st)
	}
}

// TestStreamCommitted: once a response message (or the headers) arrived,
// the stream is committed and its failure is the caller's, not retried.
func TestStreamCommitted(t *testing.T) {
	for _, c := range []struct {
		name  string
		first func(st grpc.ServerStreamingServer[testpb.StreamingOutputCallResponse]) error
		want  []string
	}{
		{"after a message", func(st grpc.ServerStreamingServer[testpb.StreamingOutputCallResponse]) error {
			return st.Send(outResp("one"))
		}, []string{"one"}},
		{"after the headers", func(st grpc.ServerStreamingServer[testpb.StreamingOutputCallResponse]) error {
			return st.SendHeader(metadata.Pairs("x-started", "yes"))
		}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := startServer(t, &server{output: func(n int, r *testpb.StreamingOutputCallRequest, st grpc.ServerStreamingServer[testpb.StreamingOutputCallResponse]) error {
				if err := c.first(st); err != nil {
					return err
				}
				return unavailable
			}})
			g := retrying(t, &waitClock{}, 3, nil)
			tc := dial(t, s, mustClient(t, ClientSettings{Default: Method{Guard: g}}))
			st, err := tc.StreamingOutputCall(context.Background(), outReq("m"))
			if err != nil {
				t.Fatal(err)
			}
			got, err := recvAll(st)
			if status.Code(err) != codes.Unavailable || !slices.Equal(got, c.want) {
				t.Fatalf("got %v, %v", got, err)
			}
			if n := len(s.seen()); n != 1 {
				t.Errorf("%d attempts of a committed stream", n)
			}
		})
	}
}

// TestStreamHeaderRetries: Header waits through a failed attempt to the
// one that answers.
func TestStreamHeaderRetries(t *testing.T) {
	s := startServer(t, &server{output: func(n int, r *testpb.StreamingOutputCallRequest, st grpc.ServerStreamingServer[testpb.StreamingOutputCallResponse]) error {
		if n == 0 {
			return unavailable
		}
		if err := st.SendHeader(metadata.Pairs("x-attempt", strconv.Itoa(n))); err != nil {
			return err
		}
		return st.Send(outResp("ok"))
	}})
	g := retrying(t, &waitClock{}, 3, nil)
	tc := dial(t, s, mustClient(t, ClientSettings{Default: Method{Guard: g}}))
	st, err := tc.StreamingOutputCall(context.Background(), outReq("m"))
	if err != nil {
		t.Fatal(err)
	}
	md, err := st.Header()
	if err != nil || !slices.Equal(md.Get("x-attempt"), []string{"1"}) {
		t.Fatalf("header %v, %v", md, err)
	}
	got, err := recvAll(st)
	if err != nil || !slices.Equal(got, []string{"ok"}) {
		t.Fatalf("got %v, %v", got, err)
	}
}

// TestStreamBidiReplay: a bidirectional stream replays every message sent
// before its commit, in order, and CloseSend.
func TestStreamBidiReplay(t *testing.T) {
	type attemptLog struct {
		got    []string
		closed bool
	}
	logs := make(chan attemptLog, 4)
	s := startServer(t, &server{duplex: func(n int, st grpc.BidiStreamingServer[testpb.StreamingOutputCallRequest, testpb.StreamingOutputCallResponse]) error {
		var l attemptLog
		defer func() { logs <- l }()
		for {
			m, err := st.Recv()
			if err == io.EOF {
				l.closed = true
				break
			}
			if err != nil {
				return err
			}
			l.got = append(l.got, string(m.GetPayload().GetBody()))
			if n == 0 && len(l.got) == 2 {
				return unavailable // the first attempt fails before answering
			}
		}
		return st.Send(outResp("sum:" + strconv.Itoa(len(l.got))))
	}})
	g := retrying(t, &waitClock{}, 3, nil)
	tc := dial(t, s, mustClient(t, ClientSettings{Default: Method{Guard: g}}))
	st, err := tc.FullDuplexCall(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range []string{"a", "b", "c"} {
		m := outReq(b)
		if err := st.Send(m); err != nil {
			t.Fatal(err)
		}
		m.Payload.Body = []byte("changed after Send") // the replay must keep what was sent
	}
	if err := st.CloseSend(); err != nil {
		t.Fatal(err)
	}
	m, err := st.Recv()
	if err != nil || string(m.GetPayload().GetBody()) != "sum:3" {
		t.Fatalf("got %v, %v", m, err)
	}
	if _, err := st.Recv(); err != io.EOF {
		t.Fatalf("end: %v", err)
	}
	first, second := <-logs, <-logs
	if !slices.Equal(first.got, []string{"a", "b"}) || !slices.Equal(second.got, []string{"a", "b", "c"}) || !second.closed {
		t.Errorf("attempts saw %+v then %+v", first, second)
	}
}

// TestStreamReplayLimit: a stream whose messages overflow the replay
// buffer commits, and is not retried.
func TestStreamReplayLimit(t *testing.T) {
	s := startServer(t, &server{duplex: func(n int, st grpc.BidiStreamingServer[testpb.StreamingOutputCallRequest, testpb.StreamingOutputCallResponse]) error {
		for {
			if _, err := st.Recv(); err != nil {
				return unavailable
			}
		}
	}})
	g := retrying(t, &waitClock{}, 3, nil)
	tc := dial(t, s, mustClient(t, ClientSettings{Default: Method{Guard: g}, ReplayLimit: 10}))
	st, err := tc.FullDuplexCall(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Send(outReq("0123456789abcdef")); err != nil {
		t.Fatal(err)
	}
	_ = st.CloseSend()
	if _, err := st.Recv(); status.Code(err) != codes.Unavailable {
		t.Fatalf("err %v", err)
	}
	if n := len(s.seen()); n != 1 {
		t.Errorf("%d attempts of a stream past its replay limit", n)
	}
}

// TestStreamAttemptTimeout: the per-attempt timeout bounds the time to
// commit: a stream that never answers is retried, one that answered lives
// on past it.
func TestStreamAttemptTimeout(t *testing.T) {
	s := startServer(t, &server{output: func(n int, r *testpb.StreamingOutputCallRequest, st grpc.ServerStreamingServer[testpb.StreamingOutputCallResponse]) error {
		if n == 0 {
			<-st.Context().Done()
			return st.Context().Err()
		}
		if err := st.Send(outResp("first")); err != nil {
			return err
		}
		time.Sleep(600 * time.Millisecond) // past the attempt timeout, after the commit
		return st.Send(outResp("late"))
	}})
	g := mustGuard(t, resil.GuardSettings{Idempotency: resil.Idempotent, AttemptTimeout: 300 * time.Millisecond,
		Policy: resil.Policy{MaxRetries: 2}})
	tc := dial(t, s, mustClient(t, ClientSettings{Default: Method{Guard: g}}))
	st, err := tc.StreamingOutputCall(context.Background(), outReq("m"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := recvAll(st)
	if err != nil || !slices.Equal(got, []string{"first", "late"}) {
		t.Fatalf("got %v, %v", got, err)
	}
	if n := len(s.seen()); n != 2 {
		t.Errorf("%d attempts", n)
	}
}

// TestStreamRefused: an open breaker refuses the stream at NewStream.
func TestStreamRefused(t *testing.T) {
	s := startServer(t, &server{output: func(n int, r *testpb.StreamingOutputCallRequest, st grpc.ServerStreamingServer[testpb.StreamingOutputCallResponse]) error {
		return unavailable
	}})
	br, _ := resil.NewBreaker(resil.BreakerSettings{Threshold: 1, Cooldown: time.Minute})
	g := mustGuard(t, resil.GuardSettings{Idempotency: resil.Idempotent, Clock: &waitClock{},
		Policy: resil.Policy{MaxRetries: 3, Breaker: br}})
	tc := dial(t, s, mustClient(t, ClientSettings{Default: Method{Guard: g}}))
	st, err := tc.StreamingOutputCall(context.Background(), outReq("m"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := recvAll(st); !errors.Is(err, resil.ErrBreakerOpen) || status.Code(err) != codes.Unavailable {
		t.Fatalf("err %v: the breaker opened on the first failure and refuses the retry", err)
	}
	_, err = tc.StreamingOutputCall(context.Background(), outReq("m"))
	if !errors.Is(err, resil.ErrBreakerOpen) || status.Code(err) != codes.Unavailable {
		t.Fatalf("NewStream through an open breaker: %v", err)
	}
	if n := len(s.seen()); n != 1 {
		t.Errorf("%d attempts", n)
	}
}

// TestStreamCallerCancels: cancelling a stream before it commits ends it
// with CANCELLED and leaves nothing running.
func TestStreamCallerCancels(t *testing.T) {
	s := startServer(t, &server{output: func(n int, r *testpb.StreamingOutputCallRequest, st grpc.ServerStreamingServer[testpb.StreamingOutputCallResponse]) error {
		<-st.Context().Done()
		return nil
	}})
	g := retrying(t, &waitClock{}, 3, nil)
	tc := dial(t, s, mustClient(t, ClientSettings{Default: Method{Guard: g}}))
	ctx, cancel := context.WithCancel(context.Background())
	st, err := tc.StreamingOutputCall(ctx, outReq("m"))
	if err != nil {
		t.Fatal(err)
	}
	time.AfterFunc(30*time.Millisecond, cancel)
	if _, err := st.Recv(); status.Code(err) != codes.Canceled {
		t.Fatalf("err %v", err)
	}
	if n := len(s.seen()); n != 1 {
		t.Errorf("%d attempts after the caller cancelled", n)
	}
}
