package calibrate_test

import (
	"context"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/stats/opentelemetry"
	"google.golang.org/grpc/status"

	"github.com/retrystorm/retrystorm/calibrate"
	"github.com/retrystorm/retrystorm/internal/promtest"
	"github.com/retrystorm/retrystorm/internal/testlock"
	"github.com/retrystorm/retrystorm/lab"
)

// The truth of TestRealGRPC: a server of 8 workers that each take 20 ms
// a call (400 calls a second), and 4 client instances that together start
// 150 calls a second, with a burst to 600 for 2 s that saturates the
// server (so its capacity shows), retrying UNAVAILABLE under their
// service config's retryPolicy, maxAttempts 3; the server answers a
// share p = 0.25 of the attempts UNAVAILABLE (after its work), each
// drawn on its own, so the retries per call are p + p² = 0.3125 and
// p³ = 1.6% of the calls fail all three attempts. (Failing every n-th
// attempt instead fails a call's retry, which comes a few attempts
// later, less often than p: not independent, and M looked larger.)
const (
	grpcWorkers  = 8
	grpcService  = 20 * time.Millisecond
	grpcClients  = 4
	grpcRate     = 150.0
	grpcBurst    = 600.0
	grpcFail     = 0.25
	grpcAttempts = 3
	grpcMaxLate  = 0.100 // a tenth of a step
)

// grpcRetryConfig is the clients' service config: gRFC A6's retryPolicy,
// as grpc-go reads it (service_config.go, v1.85.0).
var grpcRetryConfig = fmt.Sprintf(`{"methodConfig": [{
  "name": [{"service": "grpc.testing.TestService"}],
  "retryPolicy": {"maxAttempts": %d, "initialBackoff": "0.01s", "maxBackoff": "0.1s",
    "backoffMultiplier": 2, "retryableStatusCodes": ["UNAVAILABLE"]}}]}`, grpcAttempts)

// TestRealGRPC calibrates from what grpc-go itself exports: a grpc-go
// server of known capacity and four client instances, each process of
// them instrumented with grpc-go's OpenTelemetry plugin
// (google.golang.org/grpc/stats/opentelemetry, v1.85.0: the gRFC A66
// instruments of client_metrics.go and server_metrics.go) and exporting
// through the OTel Prometheus exporter (go.opentelemetry.io/otel/exporters/prometheus
// v0.69.0) on an HTTP endpoint of its own, as a fleet of pods would; a
// real Prometheus scrapes the five every second, and calibrate --source
// grpc reads the window from it. Each client instance is a Prometheus
// target, so Prometheus's instance label tells them apart (the exporter
// adds no instance label of its own: its resource goes to target_info).
func TestRealGRPC(t *testing.T) {
	t.Parallel() // see realTimeParallel
	bin := promtest.Bin(t, "the real-gRPC test takes about 30 s")
	// The lock is TestMain's. Up to testlock.Tries runs of 26 s.
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()

	// The server: its own meter provider and /metrics.
	srvMP, srvMetrics := otelEndpoint(t)
	svc := &slowService{sem: make(chan struct{}, grpcWorkers), service: grpcService, mp: srvMP, rng: rand.New(rand.NewPCG(1, 2))}
	gs, err := lab.ListenGRPC("127.0.0.1:0", svc)
	if err != nil {
		t.Fatal(err)
	}
	defer gs.Close()

	// The client instances: one connection, meter provider and /metrics
	// each.
	targets := []string{srvMetrics}
	clients := make([]testgrpc.TestServiceClient, grpcClients)
	for i := range clients {
		mp, addr := otelEndpoint(t)
		cc, err := grpc.NewClient(gs.Addr(),
			grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithDefaultServiceConfig(grpcRetryConfig),
			opentelemetry.DialOption(opentelemetry.Options{MetricsOptions: opentelemetry.MetricsOptions{MeterProvider: mp}}))
		if err != nil {
			t.Fatal(err)
		}
		defer cc.Close()
		clients[i] = testgrpc.NewTestServiceClient(cc)
		targets = append(targets, addr)
	}
	promURL := promtest.Start(t, ctx, bin, promtest.Static(targets...))

	// The server times its own calls, so a late send does not lengthen a
	// service time as it does the lab's (maxLate); late sends catch up
	// on the schedule, so only lateness near a step would blur the rate.
	// A run whose sends were later than that measured the machine: it is
	// run again, on the same servers, with the truth counted afresh.
	var begin, end time.Time
	testlock.Conclusive(t, func(int) string {
		svc.n.Store(0)
		svc.held.Store(0)
		svc.first.Store(0)
		svc.retried.Store(0)
		begin = time.Now()
		time.Sleep(3 * time.Second)
		sent, late := openLoop(ctx, clients, func(at time.Duration) float64 {
			if at >= 8*time.Second && at < 10*time.Second {
				return grpcBurst
			}
			return grpcRate
		}, 20*time.Second)
		t.Logf("load: %d calls sent, p99 late %.1fms, server: %d attempts", sent, 1000*late, svc.n.Load())
		if late > grpcMaxLate {
			return fmt.Sprintf("the load generator sent its calls up to %.0fms late (p99; at most %.0fms): the machine is too busy", 1000*late, 1000*grpcMaxLate)
		}
		time.Sleep(2500 * time.Millisecond)
		end = time.Now()
		return ""
	})
	if testing.Verbose() {
		logScrape(t, srvMetrics, targets[1])
	}

	src, _ := calibrate.SourceNamed("grpc")
	w, err := calibrate.Fetch(ctx, calibrate.Live{URL: promURL, Start: begin.Add(3 * time.Second), End: end.Add(-2 * time.Second), Step: time.Second, Source: src, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if d, err := calibrate.Detect(w); err != nil || d.Name != "grpc" {
		t.Errorf("detected %v (%v), want grpc", d, err)
	}
	r, err := calibrate.Fit(w, src)
	if err != nil {
		t.Fatal(err)
	}
	// The truth is the service time the workers were held for; the
	// 20 ms slept overshoots on a busy machine.
	service := time.Duration(svc.held.Load() / svc.n.Load()).Seconds()
	t.Logf("service time: %s slept, %s held on average", grpcService, time.Duration(service*float64(time.Second)).Round(10*time.Microsecond))
	// The retries per call as drawn: p + p² = 0.3125 on average, within
	// about 3% at 4,000 calls, and the fit's 10% is for the fit.
	retries := float64(svc.retried.Load()) / float64(svc.first.Load())
	t.Logf("retries per call: %.4f served (%d retries of %d calls), %.4f expected", retries, svc.retried.Load(), svc.first.Load(), grpcFail+grpcFail*grpcFail)
	for _, c := range []struct {
		what      string
		got, want float64
		tol       float64
	}{
		{"capacity", r.Capacity.V, grpcWorkers / service, 0.10},
		{"median service time", r.Service.Median, service, 0.10},
		{"base rate", r.Rate.V, grpcRate, 0.05},
		{"client instances", r.Clients.V, grpcClients, 0},
		// The workers are the calls finished per second times the
		// mean service time, rounded (calibrate's inFlight): two
		// measured rates whose errors the capacity's 10% allows, so one
		// worker in eight is within them (a loaded machine's fit gave 9).
		{"workers", r.Workers.V, grpcWorkers, 1.0 / grpcWorkers},
		{"retries per call", r.RetryShare.V, retries, 0.10},
		{"max retries", r.MaxRetries.V, grpcAttempts - 1, 0},
	} {
		off := math.Abs(c.got-c.want) / c.want
		t.Logf("%-20s calibrated %-10.4g truth %-10.4g off %.1f%%", c.what, c.got, c.want, 100*off)
		if off > c.tol+1e-9 {
			t.Errorf("%s: calibrated %g, truth %g: off by %.1f%%, more than %.0f%%", c.what, c.got, c.want, 100*off, 100*c.tol)
		}
	}
	if !r.Workers.Known || !r.MaxRetries.Known {
		t.Errorf("the workers (%s) or the retries (%s) were not known", r.Workers.Note, r.MaxRetries.Note)
	}
	// As the command does: the file, and its rate series, then a run.
	file, _ := writeOut(t, r)
	runBriefly(t, file)
	t.Logf("service: %s", r.ServiceNte)
	t.Logf("workers: %s", r.Workers.Note)
	t.Logf("clients: %s", r.Clients.Note)
	t.Logf("retries: %s", r.RetryShare.Note)
	t.Logf("max retries: %s", r.MaxRetries.Note)
	if *capture {
		saveSource(t, ctx, promURL, src, begin.Add(3*time.Second), end.Add(-2*time.Second), "testdata/grpc-real.json")
	}
}

// slowService is grpc.testing.TestService/UnaryCall on a server of
// known capacity: a call waits for one of the semaphore's workers, holds
// it for service, and a share grpcFail, drawn for each, answer
// UNAVAILABLE.
type slowService struct {
	testgrpc.UnimplementedTestServiceServer
	sem     chan struct{}
	service time.Duration
	mp      *sdkmetric.MeterProvider
	n       atomic.Int64
	// held is the nanoseconds the workers were held in all: a busy
	// machine's sleep overshoots, and the truth is what was served.
	held atomic.Int64
	// first and retried count the attempts served by grpc-go's
	// grpc-previous-rpc-attempts header (gRFC A6; grpc-go v1.85.0 sets it
	// in internal/transport/http2_client.go and leaves it in the incoming
	// metadata, http_util.go isReservedHeader): the retries per call
	// as they were drawn, not as p + p² says on average.
	first, retried atomic.Int64
	mu             sync.Mutex // guards rng
	rng            *rand.Rand
}

func (s *slowService) ServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{opentelemetry.ServerOption(opentelemetry.Options{MetricsOptions: opentelemetry.MetricsOptions{MeterProvider: s.mp}})}
}

func (s *slowService) Register(g *grpc.Server) { testgrpc.RegisterTestServiceServer(g, s) }

func (s *slowService) UnaryCall(ctx context.Context, _ *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
	select {
	case s.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, status.FromContextError(ctx.Err()).Err()
	}
	t0 := time.Now()
	time.Sleep(s.service)
	s.held.Add(int64(time.Since(t0)))
	<-s.sem
	s.n.Add(1)
	if md, _ := metadata.FromIncomingContext(ctx); len(md.Get("grpc-previous-rpc-attempts")) > 0 {
		s.retried.Add(1)
	} else {
		s.first.Add(1)
	}
	s.mu.Lock()
	fail := s.rng.Float64() < grpcFail
	s.mu.Unlock()
	if fail {
		return nil, status.Error(codes.Unavailable, "a quarter of the attempts fail")
	}
	return &testgrpc.SimpleResponse{}, nil
}

// otelEndpoint is one process's metrics: a meter provider whose reader is
// the OTel Prometheus exporter, served on /metrics of a loopback port
// until the test ends. It returns the provider and the port's host:port.
func otelEndpoint(t *testing.T) (*sdkmetric.MeterProvider, string) {
	t.Helper()
	reg := prometheus.NewRegistry()
	exp, err := otelprom.New(otelprom.WithRegisterer(reg))
	if err != nil {
		t.Fatal(err)
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp))
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	srv, err := lab.Listen("127.0.0.1:0", mux)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		srv.Close()
		_ = mp.Shutdown(context.Background())
	})
	return mp, srv.URL().Host
}

// openLoop starts calls at rate(elapsed) per second, in turn on each
// client, each in its own goroutine with a 5 s deadline, for d; it waits
// for them and returns how many it started and the p99 of how late it
// started them.
func openLoop(ctx context.Context, clients []testgrpc.TestServiceClient, rate func(time.Duration) float64, d time.Duration) (int, float64) {
	var wg sync.WaitGroup
	var lates []float64
	start := time.Now()
	n := 0
	for at := time.Duration(0); at < d && ctx.Err() == nil; at += time.Duration(float64(time.Second) / rate(at)) {
		if wait := time.Until(start.Add(at)); wait > 0 {
			time.Sleep(wait)
		}
		lates = append(lates, time.Since(start.Add(at)).Seconds())
		c := clients[n%len(clients)]
		n++
		wg.Go(func() {
			cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			_, _ = c.UnaryCall(cctx, &testgrpc.SimpleRequest{})
		})
	}
	wg.Wait()
	slices.Sort(lates)
	return n, lates[len(lates)*99/100]
}

// logScrape logs the metric families and label names of one scrape of
// the server's and a client's endpoint: what the exporter really writes.
func logScrape(t *testing.T, hosts ...string) {
	for _, h := range hosts {
		res, err := http.Get("http://" + h + "/metrics")
		if err != nil {
			t.Log(err)
			continue
		}
		b, _ := io.ReadAll(io.LimitReader(res.Body, 1<<20))
		res.Body.Close()
		var keep []string
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "# TYPE") || strings.Contains(l, "_count{") || strings.Contains(l, "_total{") || strings.HasPrefix(l, "target_info") || strings.Contains(l, `le="0.02"`) {
				keep = append(keep, l)
			}
		}
		t.Logf("%s/metrics:\n%s", h, strings.Join(keep, "\n"))
	}
}
