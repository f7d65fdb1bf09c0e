package lab

import (
	"bytes"
	"context"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/retrystorm/retrystorm/internal/testlock"
	"github.com/retrystorm/retrystorm/resil"
	"github.com/retrystorm/retrystorm/resil/resilgrpc"
	"github.com/retrystorm/retrystorm/scenario"
)

// startGRPC serves svc over gRPC on loopback until the test ends.
func startGRPC(t *testing.T, svc GRPCService) string {
	t.Helper()
	s, err := ListenGRPC("127.0.0.1:0", svc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s.Addr()
}

// startGRPCOrigin runs an origin on loopback, over gRPC and HTTP (its
// metrics), until the test ends.
func startGRPCOrigin(t *testing.T, cfg OriginConfig) (*Origin, string, string) {
	t.Helper()
	o, web := startOrigin(t, cfg)
	return o, startGRPC(t, o), web
}

// grpcClient is a TestService client of addr, without retries, closed
// when the test ends.
func grpcClient(t *testing.T, addr string) testgrpc.TestServiceClient {
	t.Helper()
	cc, err := grpc.NewClient("passthrough:///"+addr,
		grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithDisableRetry())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	return testgrpc.NewTestServiceClient(cc)
}

// grpcReply is what a test call got.
type grpcReply struct {
	code    codes.Code
	trailer metadata.MD
	body    []byte
	took    time.Duration
}

// unary calls UnaryCall with body, giving up after timeout; md are name,
// value pairs.
func unary(c testgrpc.TestServiceClient, body string, timeout time.Duration, md ...string) grpcReply {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if len(md) > 0 {
		ctx = metadata.AppendToOutgoingContext(ctx, md...)
	}
	var r grpcReply
	start := time.Now()
	out, err := c.UnaryCall(ctx, &testgrpc.SimpleRequest{Payload: &testgrpc.Payload{Body: []byte(body)}}, grpc.Trailer(&r.trailer))
	r.took, r.code, r.body = time.Since(start), status.Code(err), out.GetPayload().GetBody()
	return r
}

// TestGRPCOriginAnswers: over gRPC the origin is the same model: it
// answers within capacity, rejects with UNAVAILABLE at once when its queue
// is full, counts each attempt by the kind the metadata names, and serves
// OpenTelemetry's metrics beside its own on /metrics.
func TestGRPCOriginAnswers(t *testing.T) {
	o := queueOrigin(1, 10) // 100 ms each
	o.QueueLimit = 1
	_, addr, web := startGRPCOrigin(t, OriginConfig{Origin: o})
	c := grpcClient(t, addr)
	var wg sync.WaitGroup
	var first grpcReply
	wg.Go(func() { first = unary(c, "", 5*time.Second, AttemptHeader, "retry") }) // in service
	time.Sleep(20 * time.Millisecond)
	wg.Go(func() { unary(c, "", 5*time.Second) }) // queued
	time.Sleep(20 * time.Millisecond)
	r := unary(c, "", 5*time.Second)
	wg.Wait()
	if first.code != codes.OK || first.took < 80*time.Millisecond {
		t.Errorf("first call: %v after %v, want OK after its 100 ms of service", first.code, first.took)
	}
	if r.code != codes.Unavailable || (!slow() && r.took > 80*time.Millisecond) {
		t.Errorf("third call: %v after %v, want UNAVAILABLE at once", r.code, r.took)
	}
	m := send(testClient(t), "GET", web+"/metrics", time.Second)
	if miss := contains(m.body,
		`retrystorm_origin_attempts_total{kind="retry"} 1`,
		`retrystorm_origin_requests_total{result="rejected"} 1`,
		`rpc_server_call_duration_seconds_count{`,
		`rpc_method="grpc.testing.TestService/UnaryCall"`,
		`rpc_response_status_code="UNAVAILABLE"`,
		`rpc_system_name="grpc"`,
		`target_info{`, `service_name="retrystorm-origin"`,
	); len(miss) > 0 {
		t.Errorf("/metrics lacks %q", miss)
	}
	if !strings.Contains(m.body, `rpc_response_status_code="OK"`) {
		t.Error("/metrics has no successful call")
	}
}

// TestOriginHTTPOpenTelemetry: the HTTP edge records
// http.server.request.duration.
func TestOriginHTTPOpenTelemetry(t *testing.T) {
	_, web := startOrigin(t, OriginConfig{Origin: queueOrigin(1, 100)})
	c := testClient(t)
	send(c, "GET", web, time.Second)
	m := send(c, "GET", web+"/metrics", time.Second)
	if miss := contains(m.body, `http_server_request_duration_seconds_count{`, `http_request_method="GET"`, `http_response_status_code="200"`); len(miss) > 0 {
		t.Errorf("/metrics lacks %q", miss)
	}
}

// TestGRPCOriginBlackhole: during an outage the origin never answers: the
// call is held until its deadline ends it, and costs no work.
func TestGRPCOriginBlackhole(t *testing.T) {
	org, addr, _ := startGRPCOrigin(t, OriginConfig{Origin: queueOrigin(1, 100),
		Triggers: []scenario.Trigger{{Kind: scenario.TriggerOutage, At: 0, For: time.Hour}}})
	r := unary(grpcClient(t, addr), "", 150*time.Millisecond)
	if r.code != codes.DeadlineExceeded || r.took < 140*time.Millisecond {
		t.Errorf("during the outage: %v after %v, want DEADLINE_EXCEEDED after the call's 150 ms", r.code, r.took)
	}
	if q := org.Queued(); q != 0 {
		t.Errorf("%d queued after the outage's call, want 0", q)
	}
}

// TestGRPCOriginDropsExpired: with drop_expired the gRPC edge is the HTTP
// edge's path into the model: a call whose deadline falls before its
// service could end is skipped by the model, unanswered (its caller sees
// DEADLINE_EXCEEDED) and costing no work, whether it could never make it
// or waited in the queue until it could not.
func TestGRPCOriginDropsExpired(t *testing.T) {
	// The checks allow late for the machine; a run in which the process
	// itself stalled for half of that is measured again (testlock.Timed):
	// a stall between the calls below changes their order in the queue.
	late := 80 * time.Millisecond
	if slow() {
		late = 300 * time.Millisecond
	}
	testlock.Timed(t, late/2, func() func() {
		o := queueOrigin(1, 5) // 200 ms each
		o.DropExpired = true
		org, addr, _ := startGRPCOrigin(t, OriginConfig{Origin: o})
		c := grpcClient(t, addr)
		never := unary(c, "", 100*time.Millisecond)
		var wg sync.WaitGroup
		wg.Go(func() { unary(c, "", 5*time.Second) }) // holds the worker 0-200 ms
		time.Sleep(10 * time.Millisecond)
		var doomed grpcReply
		// It would start at 200 ms and end at 400: past its 300 ms.
		wg.Go(func() { doomed = unary(c, "", 300*time.Millisecond) })
		time.Sleep(10 * time.Millisecond)
		last := unary(c, "", 5*time.Second)
		wg.Wait()
		return func() {
			if never.code != codes.DeadlineExceeded {
				t.Errorf("a call with 100 ms left for 200 ms of work: %v, want DEADLINE_EXCEEDED (dropped)", never.code)
			}
			if doomed.code != codes.DeadlineExceeded || last.code != codes.OK || last.took > 400*time.Millisecond+late {
				t.Errorf("doomed %v, the next %v after %v; want DEADLINE_EXCEEDED, then OK after about 380 ms", doomed.code, last.code, last.took)
			}
			if got := org.Counts(); got.Dropped != 2 || got.Wasted != 0 {
				t.Errorf("counts %+v, want 2 dropped, none wasted", got)
			}
		}
	})
}

// TestGRPCOriginShedsByDeadline: with deadline shedding the gRPC edge
// admits through the origin's resil Shedder, as resilhttp.Shed does over
// HTTP (TestOriginShedsByDeadline): a call whose deadline is nearer than
// the work is refused before the handler, at once, with UNAVAILABLE and a
// pushback that asks not to retry; one that waited until it could no
// longer be answered in time is refused when the worker frees up; neither
// costs work; and both edges' counts are the same metrics.
func TestGRPCOriginShedsByDeadline(t *testing.T) {
	// The checks allow late for the machine; a run in which the process
	// itself stalled for half of that is measured again (testlock.Timed).
	late := 80 * time.Millisecond
	if slow() {
		late = 300 * time.Millisecond
	}
	testlock.Timed(t, late/2, func() func() {
		o := queueOrigin(1, 5) // 200 ms each
		o.Shed = scenario.Shed{Deadline: true}
		org, addr, web := startGRPCOrigin(t, OriginConfig{Origin: o})
		c := grpcClient(t, addr)
		var wg sync.WaitGroup
		wg.Go(func() { unary(c, "", 5*time.Second) }) // holds the worker 0-200 ms
		time.Sleep(10 * time.Millisecond)
		tooLate := unary(c, "", 100*time.Millisecond)
		var doomed grpcReply
		// Queued at 20 ms; at 200 ms it has 120 ms left for 200 ms of work.
		wg.Go(func() { doomed = unary(c, "", 300*time.Millisecond) })
		time.Sleep(10 * time.Millisecond)
		last := unary(c, "", 5*time.Second) // queued behind it
		wg.Wait()
		return func() {
			if tooLate.code != codes.Unavailable || first(tooLate.trailer, resilgrpc.PushbackHeader) != "-1" || tooLate.took > late {
				t.Errorf("the call with 100 ms for 200 ms of work: %v, pushback %q, after %v; want UNAVAILABLE and -1 at once",
					tooLate.code, tooLate.trailer.Get(resilgrpc.PushbackHeader), tooLate.took)
			}
			if doomed.code != codes.Unavailable || doomed.took > 200*time.Millisecond+late {
				t.Errorf("the call that waited too long: %v after %v, want UNAVAILABLE when the worker freed up, at about 180 ms", doomed.code, doomed.took)
			}
			if last.code != codes.OK || last.took > 400*time.Millisecond+late {
				t.Errorf("the next call: %v after %v, want OK after about 370 ms (the refused ones cost nothing)", last.code, last.took)
			}
			if got := org.Counts(); got.Wasted != 0 {
				t.Errorf("counts %+v, want nothing wasted", got)
			}
			m := send(testClient(t), "GET", web+"/metrics", time.Second)
			if miss := contains(m.body,
				`resil_shed_refused_total{name="origin",reason="too_late"} 1`,
				`retrystorm_origin_requests_total{result="shed"} 1`,
				`retrystorm_origin_requests_total{result="rejected"} 1`,
				`retrystorm_origin_attempts_total{kind="unknown"} 4`,
			); len(miss) > 0 {
				t.Errorf("/metrics lacks %q", miss)
			}
		}
	})
}

// TestGRPCOriginIdempotencyKeys: a call marked with a side effect is an
// execution; with a key it executes once, without one every retry
// executes again, a duplicate.
func TestGRPCOriginIdempotencyKeys(t *testing.T) {
	org, addr, _ := startGRPCOrigin(t, OriginConfig{Origin: queueOrigin(1, 100)})
	c := grpcClient(t, addr)
	for range 2 {
		unary(c, "", time.Second, IdempotentHeader, "false", IntentHeader, "1", resilgrpc.DefaultKeyHeader, "k1")
		unary(c, "", time.Second, IdempotentHeader, "false", IntentHeader, "2")
		unary(c, "", time.Second, IntentHeader, "3") // idempotent: no execution
	}
	if got := org.Counts(); got.Executions != 3 || got.Duplicates != 1 || got.Replayed != 1 {
		t.Errorf("counts %+v, want 3 executions (k1, 2 twice), 1 duplicate, 1 replayed", got)
	}
}

// echo is a gRPC service that answers UnaryCall with the request's
// payload, and records what it heard: a service the gateway knows nothing
// about.
type echo struct {
	testgrpc.UnimplementedTestServiceServer
	mu    sync.Mutex
	heard []metadata.MD
	fail  int // answer UNAVAILABLE to this many calls first
}

func (e *echo) ServerOptions() []grpc.ServerOption { return nil }
func (e *echo) Register(s *grpc.Server)            { testgrpc.RegisterTestServiceServer(s, e) }

func (e *echo) UnaryCall(ctx context.Context, r *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	e.mu.Lock()
	e.heard = append(e.heard, md)
	n := len(e.heard)
	e.mu.Unlock()
	if n <= e.fail {
		return nil, status.Error(codes.Unavailable, "not yet")
	}
	return &testgrpc.SimpleResponse{Payload: r.GetPayload(), Hostname: "echo"}, nil
}

// startGRPCGateway runs a gateway over gRPC in front of the origin at addr
// until the test ends.
func startGRPCGateway(t *testing.T, addr string, f scenario.Fleet, tally *Tally) (*GRPCGateway, string) {
	t.Helper()
	g, err := NewGRPCGateway(GatewayConfig{Fleet: f, Clients: 1, Origin: &url.URL{Host: addr}, Seed: 1, Tally: tally})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Close)
	return g, startGRPC(t, g)
}

// TestGRPCGatewayProxies: the gateway forwards a message it never decodes,
// retries UNAVAILABLE under its client's Guard, tells the origin why it
// sent each attempt and forwards the intent, and tells its caller how the
// intent went in trailers; the last hop counts each attempt by its kind.
func TestGRPCGatewayProxies(t *testing.T) {
	e := &echo{fail: 2}
	tally := NewTally(time.Now(), time.Hour, 1)
	_, gw := startGRPCGateway(t, startGRPC(t, e), naiveFleet(time.Second), tally)
	r := unary(grpcClient(t, gw), "the body", 5*time.Second, IntentHeader, "7", ClientHeader, "0")
	if r.code != codes.OK || !bytes.Equal(r.body, []byte("the body")) {
		t.Fatalf("reply %v %q, want OK and the body echoed", r.code, r.body)
	}
	if a, f := first(r.trailer, AttemptsHeader), first(r.trailer, FailedHeader); a != "3" || f != "2" {
		t.Errorf("trailers: %s attempts, %s failed; want 3, 2", a, f)
	}
	e.mu.Lock()
	var kinds []string
	for _, md := range e.heard {
		kinds = append(kinds, first(md, AttemptHeader))
		if first(md, IntentHeader) != "7" {
			t.Errorf("the origin heard intent %q, want 7", first(md, IntentHeader))
		}
	}
	e.mu.Unlock()
	if strings.Join(kinds, " ") != "first retry retry" {
		t.Errorf("the origin heard attempts %q, want first retry retry", kinds)
	}
	s := tally.series()
	if s.FirstAttempts[0] != 1 || s.Retries[0] != 2 || s.FailedAttempts[0] != 2 || s.Goodput[0] != 1 {
		t.Errorf("tally: first %d, retries %d, failed %d, goodput %d; want 1, 2, 2, 1",
			s.FirstAttempts[0], s.Retries[0], s.FailedAttempts[0], s.Goodput[0])
	}
}

// TestGRPCGatewayStops: the stop the gateway reports is the Guard's
// (resil.ReasonOf), and a client whose breaker is open gets the fallback:
// OK, with FallbackHeader, and nothing sent.
func TestGRPCGatewayStops(t *testing.T) {
	_, origin, _ := startGRPCOrigin(t, OriginConfig{Origin: failingOrigin()})
	_, gw := startGRPCGateway(t, origin, naiveFleet(time.Second), nil)
	r := unary(grpcClient(t, gw), "", 5*time.Second)
	if r.code != codes.Unavailable || first(r.trailer, StopHeader) != "retries_exhausted" || first(r.trailer, AttemptsHeader) != "4" {
		t.Errorf("naive: %v, stop %q after %s attempts; want UNAVAILABLE, retries_exhausted after 4",
			r.code, first(r.trailer, StopHeader), first(r.trailer, AttemptsHeader))
	}

	g, gw := startGRPCGateway(t, origin, guardedFleet(time.Second, 10, 2), nil)
	c := grpcClient(t, gw)
	r = unary(c, "", 5*time.Second)
	if first(r.trailer, StopHeader) != "breaker" || first(r.trailer, FallbackHeader) == "" {
		t.Errorf("guarded: stop %q, fallback %q; want the breaker's fallback after two failures",
			first(r.trailer, StopHeader), first(r.trailer, FallbackHeader))
	}
	r = unary(c, "", 5*time.Second)
	if r.code != codes.OK || first(r.trailer, FallbackHeader) == "" || first(r.trailer, AttemptsHeader) != "0" {
		t.Errorf("with the breaker open: %v, fallback %q, %s attempts; want OK, the fallback, nothing sent",
			r.code, first(r.trailer, FallbackHeader), first(r.trailer, AttemptsHeader))
	}
	if g.OpenShare(time.Now()) != 1 || g.Counts().BreakerRefusals != 2 {
		t.Errorf("open share %g, refusals %d; want 1, 2", g.OpenShare(time.Now()), g.Counts().BreakerRefusals)
	}
	m := send(testClient(t), "GET", startServer(t, g.Handler())+"/metrics", time.Second)
	if miss := contains(m.body, "retrystorm_gateway_fallbacks_total 2", `retrystorm_gateway_requests_total{code="OK"} 2`,
		`resil_breaker_state{name="guarded-00"} 1`); len(miss) > 0 {
		t.Errorf("/metrics lacks %q", miss)
	}
}

// TestGRPCGatewayThrottle is TestGatewayThrottle over gRPC: against an
// origin that fails everything, the adaptive throttle soon refuses calls
// locally, with UNAVAILABLE (the HTTP gateway's 503) and the throttle's
// stop reason, nothing sent, each refusal counted apart from a breaker's.
func TestGRPCGatewayThrottle(t *testing.T) {
	_, origin, _ := startGRPCOrigin(t, OriginConfig{Origin: failingOrigin()})
	f := guardedFleet(time.Second, 10, 0)
	f.Name = "throttled"
	f.Throttle = scenario.Throttle{Use: scenario.ThrottleAdaptive, ThrottlerSettings: resil.ThrottlerSettings{K: 2, Window: 10 * time.Second, Padding: 1, MaxProbability: 1}}
	tally := NewTally(time.Now(), time.Minute, 1)
	g, gw := startGRPCGateway(t, origin, f, tally)
	c := grpcClient(t, gw)
	refused := 0
	for range 30 {
		r := unary(c, "", 5*time.Second)
		if first(r.trailer, StopHeader) == "throttled" && first(r.trailer, AttemptsHeader) == "0" {
			if r.code != codes.Unavailable {
				t.Errorf("a throttled call answered %v, want UNAVAILABLE", r.code)
			}
			refused++
		}
	}
	s := tally.series()
	if refused == 0 || s.ThrottleRefusals[0] < int64(refused) || s.BreakerRefusals[0] != 0 {
		t.Errorf("%d calls refused at once; the tally counts %d throttle refusals and %d breaker refusals", refused, s.ThrottleRefusals[0], s.BreakerRefusals[0])
	}
	m := send(testClient(t), "GET", startServer(t, g.Handler())+"/metrics", time.Second)
	if miss := contains(m.body, `resil_throttle_refusals_total{name="throttled-00"}`); len(miss) > 0 {
		t.Errorf("/metrics lacks %q", miss)
	}
}

// TestGRPCGatewaySideEffects: a naive gateway retries a call with a side
// effect blindly, and the origin executes it each time; a guarded one does
// not retry it without a key.
func TestGRPCGatewaySideEffects(t *testing.T) {
	slowOrigin := queueOrigin(1, 10) // 100 ms per call: longer than the 60 ms timeout
	for _, tc := range []struct {
		fleet      scenario.Fleet
		key        string
		stop       string
		executions int64
	}{
		{naiveFleet(60 * time.Millisecond), "", "retries_exhausted", 4},
		{guardedFleet(60*time.Millisecond, 10, 0), "", "not_idempotent", 1},
		{guardedFleet(60*time.Millisecond, 10, 0), "k", "", 1},
	} {
		org, origin, _ := startGRPCOrigin(t, OriginConfig{Origin: slowOrigin})
		_, gw := startGRPCGateway(t, origin, tc.fleet, nil)
		md := []string{IntentHeader, "1", IdempotentHeader, "false"}
		if tc.key != "" {
			md = append(md, resilgrpc.DefaultKeyHeader, tc.key)
		}
		r := unary(grpcClient(t, gw), "", 5*time.Second, md...)
		time.Sleep(500 * time.Millisecond) // the origin finishes what it started
		if got := org.Counts(); first(r.trailer, StopHeader) != tc.stop || got.Executions != tc.executions {
			t.Errorf("%s, key %q: %v, stop %q, %d executions; want stop %q, %d executions",
				tc.fleet.Name, tc.key, r.code, first(r.trailer, StopHeader), got.Executions, tc.stop, tc.executions)
		}
	}
}

// TestGRPCGatewayUnaryOnly: a call that streams more than one message is
// refused, not half forwarded.
func TestGRPCGatewayUnaryOnly(t *testing.T) {
	_, gw := startGRPCGateway(t, startGRPC(t, &echo{}), naiveFleet(time.Second), nil)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := grpcClient(t, gw).FullDuplexCall(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		_ = st.Send(&testgrpc.StreamingOutputCallRequest{})
	}
	_ = st.CloseSend()
	if _, err := st.Recv(); status.Code(err) != codes.Unimplemented {
		t.Errorf("a stream of two messages: %v, want UNIMPLEMENTED", err)
	}
}

// TestLoadOverGRPC: the load generator's schedule is the same over gRPC;
// only the send differs: every intent is a call, with its intent, client,
// side effect and key as metadata.
func TestLoadOverGRPC(t *testing.T) {
	e := &echo{}
	addr := startGRPC(t, e)
	st, err := RunLoad(context.Background(), LoadConfig{
		Target: &url.URL{Host: addr}, Protocol: ProtocolGRPC,
		Traffic:  scenario.Traffic{Rate: 2000, Arrivals: "constant", Clients: 4, Idempotent: 0.5, Keys: 1},
		Start:    time.Now().Add(20 * time.Millisecond),
		Duration: 200 * time.Millisecond, Deadline: 2 * time.Second, Seed: 3,
	})
	if err != nil {
		t.Fatal(err)
	}
	if st.Sent != 400 || st.Succeeded != 400 {
		t.Errorf("%d sent, %d succeeded; want 400 and 400", st.Sent, st.Succeeded)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	effects, keys, clients := 0, 0, map[string]bool{}
	for _, md := range e.heard {
		if first(md, IdempotentHeader) == "false" {
			effects++
		}
		if first(md, resilgrpc.DefaultKeyHeader) != "" {
			keys++
		}
		clients[first(md, ClientHeader)] = true
		if first(md, IntentHeader) == "" {
			t.Error("a call without its intent")
		}
	}
	if effects < 150 || effects > 250 || keys != effects || len(clients) != 4 {
		t.Errorf("%d calls with a side effect (%d with a key) of 400, %d clients; want about half, all keyed, 4", effects, keys, len(clients))
	}
}

func TestParseProtocol(t *testing.T) {
	for in, want := range map[string]Protocol{"": ProtocolHTTP, "http": ProtocolHTTP, "grpc": ProtocolGRPC} {
		if p, err := ParseProtocol(in); p != want || err != nil {
			t.Errorf("ParseProtocol(%q) = %q, %v", in, p, err)
		}
	}
	if _, err := ParseProtocol("GRPC"); err == nil {
		t.Error("ParseProtocol took GRPC")
	}
	if _, err := ListenGRPC("0.0.0.0:0", &echo{}); err == nil {
		t.Error("ListenGRPC listened beyond loopback")
	}
}
