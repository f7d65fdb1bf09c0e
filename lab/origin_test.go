package lab

import (
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/retrystorm/retrystorm/internal/testlock"
	"github.com/retrystorm/retrystorm/resil/resilhttp"
	"github.com/retrystorm/retrystorm/scenario"
)

// TestOriginServesAtCapacity: W workers holding a request for W/C seconds
// serve C requests per second, however the backlog arrives.
func TestOriginServesAtCapacity(t *testing.T) {
	_, url := startOrigin(t, OriginConfig{Origin: queueOrigin(4, 400)}) // 10 ms each
	c := testClient(t)
	const n = 200
	start := time.Now()
	var wg sync.WaitGroup
	var mu sync.Mutex
	ok := 0
	for range n {
		wg.Go(func() {
			if r := send(c, "GET", url, 5*time.Second); r.status == http.StatusOK {
				mu.Lock()
				ok++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	took := time.Since(start)
	if ok != n {
		t.Fatalf("%d of %d answered", ok, n)
	}
	ideal := n * time.Second / 400
	t.Logf("%d requests in %v (ideal %v)", n, took, ideal)
	if took < ideal-20*time.Millisecond {
		t.Errorf("served %d in %v: faster than its capacity allows (%v)", n, took, ideal)
	}
	if !slow() && took > ideal*2 {
		t.Errorf("served %d in %v: far slower than its capacity (%v)", n, took, ideal)
	}
}

// arrivals sends one request per header value, spaced so that they queue
// in that order behind a first one that holds the only worker, and returns
// the values in the order they were answered.
func arrivals(t *testing.T, url string, values ...string) []string {
	c := testClient(t)
	var mu sync.Mutex
	var done []string
	var wg sync.WaitGroup
	wg.Go(func() { send(c, "GET", url, 5*time.Second) })
	time.Sleep(10 * time.Millisecond)
	for _, v := range values {
		wg.Go(func() {
			send(c, "GET", url, 5*time.Second, IntentHeader, v)
			mu.Lock()
			done = append(done, v)
			mu.Unlock()
		})
		time.Sleep(5 * time.Millisecond)
	}
	wg.Wait()
	return done
}

func TestOriginFIFOAndLIFO(t *testing.T) {
	for _, tc := range []struct {
		discipline string
		want       string
	}{{"fifo", "a b c"}, {"lifo", "c b a"}} {
		o := queueOrigin(1, 25) // 40 ms each
		o.Discipline = tc.discipline
		_, url := startOrigin(t, OriginConfig{Origin: o})
		if got := strings.Join(arrivals(t, url, "a", "b", "c"), " "); got != tc.want {
			t.Errorf("%s: answered %s, want %s", tc.discipline, got, tc.want)
		}
	}
}

// TestOriginServesForNobody: a request whose client left while it waited
// still costs a worker its service time, unless drop_expired.
func TestOriginServesForNobody(t *testing.T) {
	for _, drop := range []bool{false, true} {
		o := queueOrigin(1, 5) // 200 ms each
		o.DropExpired = drop
		org, url := startOrigin(t, OriginConfig{Origin: o})
		c := testClient(t)
		var wg sync.WaitGroup
		wg.Go(func() { send(c, "GET", url, 5*time.Second) }) // holds the worker 0-200 ms
		time.Sleep(10 * time.Millisecond)
		wg.Go(func() { send(c, "GET", url, 60*time.Millisecond) }) // leaves at 70 ms, queued
		time.Sleep(10 * time.Millisecond)
		last := send(c, "GET", url, 5*time.Second) // arrives at 20 ms
		wg.Wait()
		time.Sleep(20 * time.Millisecond)
		got := org.Counts()
		t.Logf("drop_expired=%v: the last request took %v; %+v", drop, last.took, got)
		if last.status != http.StatusOK {
			t.Fatalf("drop_expired=%v: last request: %d %v", drop, last.status, last.err)
		}
		if !drop {
			// 200 ms for the first, 200 for the ghost, 200 for itself.
			if last.took < 480*time.Millisecond || got.Wasted != 1 || got.Dropped != 0 {
				t.Errorf("without drop_expired: took %v (want about 580ms), wasted %d (want 1), dropped %d", last.took, got.Wasted, got.Dropped)
			}
		} else if last.took > 480*time.Millisecond || got.Wasted != 0 || got.Dropped != 1 {
			t.Errorf("with drop_expired: took %v (want about 380ms), wasted %d (want 0), dropped %d (want 1)", last.took, got.Wasted, got.Dropped)
		}
	}
}

// TestOriginDropsWhatCannotMakeItsDeadline: with drop_expired, a request
// whose propagated deadline falls before its service could end is skipped
// at once, and costs no work.
func TestOriginDropsWhatCannotMakeItsDeadline(t *testing.T) {
	o := queueOrigin(1, 5) // 200 ms each
	o.DropExpired = true
	org, url := startOrigin(t, OriginConfig{Origin: o})
	c := testClient(t)
	var wg sync.WaitGroup
	wg.Go(func() { send(c, "GET", url, 5*time.Second) })
	time.Sleep(10 * time.Millisecond)
	var doomed reply
	// It would start at 200 ms and end at 400: past its 240 ms.
	wg.Go(func() { doomed = send(c, "GET", url, 600*time.Millisecond, TimeoutHeader, "240m") })
	time.Sleep(10 * time.Millisecond)
	last := send(c, "GET", url, 5*time.Second)
	wg.Wait()
	if doomed.err == nil {
		t.Errorf("the request that could not be served in time got an answer: %d", doomed.status)
	}
	if last.status != http.StatusOK || last.took > 480*time.Millisecond {
		t.Errorf("the next request: %d after %v, want 200 after about 380ms (the doomed one costs nothing)", last.status, last.took)
	}
	if got := org.Counts(); got.Dropped != 1 || got.Wasted != 0 {
		t.Errorf("counts %+v, want 1 dropped, none wasted", got)
	}
}

func TestOriginBoundedQueueRejects(t *testing.T) {
	o := queueOrigin(1, 10)
	o.QueueLimit = 1
	_, url := startOrigin(t, OriginConfig{Origin: o})
	c := testClient(t)
	var wg sync.WaitGroup
	wg.Go(func() { send(c, "GET", url, 5*time.Second) }) // in service
	time.Sleep(10 * time.Millisecond)
	wg.Go(func() { send(c, "GET", url, 5*time.Second) }) // queued
	time.Sleep(10 * time.Millisecond)
	r := send(c, "GET", url, 5*time.Second)
	wg.Wait()
	if r.status != http.StatusServiceUnavailable || r.took > 80*time.Millisecond {
		t.Errorf("third request: %d after %v, want 503 at once", r.status, r.took)
	}
}

// TestOriginAdminFaults injects an error blip through the admin endpoint:
// errors come after the service time (they cost work), and end with the
// fault.
func TestOriginAdminFaults(t *testing.T) {
	_, url := startOrigin(t, OriginConfig{Origin: queueOrigin(2, 40), AdminToken: "t0"}) // 50 ms each
	c := testClient(t)
	if r := send(c, "GET", url, time.Second); r.status != http.StatusOK {
		t.Fatalf("before the fault: %d %v", r.status, r.err)
	}
	r := send(c, "POST", url+"/admin/faults?token=t0&kind=errors&error_rate=1&for=10s", time.Second)
	if r.status != http.StatusOK {
		t.Fatalf("inject: %d %s", r.status, r.body)
	}
	var st adminState
	if err := json.Unmarshal([]byte(r.body), &st); err != nil {
		t.Fatal(err)
	}
	if st.ErrorRate != 1 || len(st.Faults) != 1 || st.Faults[0].Source != "admin" {
		t.Errorf("state after inject: %+v", st)
	}
	r = send(c, "GET", url, time.Second)
	if r.status != http.StatusServiceUnavailable || r.took < 45*time.Millisecond {
		t.Errorf("during the blip: %d after %v, want 503 after the service time", r.status, r.took)
	}
	if r := send(c, "DELETE", url+"/admin/faults?token=t0", time.Second); r.status != http.StatusOK {
		t.Fatalf("clear: %d", r.status)
	}
	if r := send(c, "GET", url, time.Second); r.status != http.StatusOK {
		t.Errorf("after clearing: %d", r.status)
	}
	for _, bad := range []string{"kind=nope&for=1s", "kind=errors&error_rate=2&for=1s", "kind=outage", "kind=capacity&capacity=x&for=1s", "kind=outage&for=-1s"} {
		if r := send(c, "POST", url+"/admin/faults?token=t0&"+bad, time.Second); r.status != http.StatusBadRequest {
			t.Errorf("POST %s: %d, want 400", bad, r.status)
		}
	}
	if r := send(c, "PUT", url+"/admin/faults?token=t0", time.Second); r.status != http.StatusMethodNotAllowed {
		t.Errorf("PUT: %d, want 405", r.status)
	}
}

// TestOriginScheduledFaults: an outage, then a capacity dip to zero, on
// the scenario's schedule.
func TestOriginScheduledFaults(t *testing.T) {
	start := time.Now()
	_, url := startOrigin(t, OriginConfig{
		Origin: queueOrigin(1, 100),
		Start:  start,
		Triggers: []scenario.Trigger{
			{Kind: scenario.TriggerOutage, At: 0, For: 200 * time.Millisecond},
			{Kind: scenario.TriggerCapacity, At: 200 * time.Millisecond, For: 200 * time.Millisecond, Capacity: 0},
		},
	})
	c := testClient(t)
	if r := send(c, "GET", url, 100*time.Millisecond); r.err == nil {
		t.Errorf("during the outage: answered %d", r.status)
	}
	time.Sleep(time.Until(start.Add(250 * time.Millisecond)))
	r := send(c, "GET", url, 2*time.Second)
	if r.status != http.StatusOK || time.Since(start) < 400*time.Millisecond {
		t.Errorf("during the dip to zero: %d at %v, want 200 once capacity is back at 400ms", r.status, time.Since(start))
	}
}

// TestOriginIdempotencyKeys: a POST with a key executes once, however many
// times it is sent; without a key, every retry executes again.
func TestOriginIdempotencyKeys(t *testing.T) {
	org, url := startOrigin(t, OriginConfig{Origin: queueOrigin(1, 5)}) // 200 ms each
	c := testClient(t)
	key := resilhttp.DefaultKeyHeader
	// The first send gives up mid-service: the effect still happens.
	if r := send(c, "POST", url, 50*time.Millisecond, key, "k1", IntentHeader, "1"); r.err == nil {
		t.Fatalf("the first send should have given up, got %d", r.status)
	}
	time.Sleep(200 * time.Millisecond)
	r := send(c, "POST", url, time.Second, key, "k1", IntentHeader, "1")
	if r.status != http.StatusOK || r.took > 150*time.Millisecond {
		t.Errorf("retry with the key: %d after %v, want 200 from memory", r.status, r.took)
	}
	// Two sends of one key at once: the second waits for the first.
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			if r := send(c, "POST", url, time.Second, key, "k2", IntentHeader, "2"); r.status != http.StatusOK {
				t.Errorf("concurrent send with one key: %d %v", r.status, r.err)
			}
		})
	}
	wg.Wait()
	// Without a key, the retry executes again: a duplicate.
	for range 2 {
		send(c, "POST", url, time.Second, IntentHeader, "3")
	}
	got := org.Counts()
	if got.Executions != 4 || got.Duplicates != 1 || got.Replayed != 2 {
		t.Errorf("counts %+v, want 4 executions (k1, k2, 3 twice), 1 duplicate, 2 replayed", got)
	}
}

func TestOriginCapacityModel(t *testing.T) {
	_, url := startOrigin(t, OriginConfig{Origin: scenario.Origin{
		Model: scenario.ModelCapacity, Capacity: 20, Latency: 20 * time.Millisecond, Replicas: 1,
	}})
	c := testClient(t)
	var mu sync.Mutex
	codes := map[int]int{}
	var wg sync.WaitGroup
	for range 10 {
		wg.Go(func() {
			r := send(c, "GET", url, time.Second)
			mu.Lock()
			codes[r.status]++
			mu.Unlock()
		})
	}
	wg.Wait()
	// It saves a tenth of a second of capacity (2 requests) and earns one
	// every 50 ms: a burst of ten gets two or three answers.
	if codes[200] < 1 || codes[200] > 4 || codes[200]+codes[503] != 10 {
		t.Errorf("a burst of 10 got %v, want 2 or 3 answered and the rest rejected", codes)
	}
}

func TestOriginConcurrencyModel(t *testing.T) {
	_, url := startOrigin(t, OriginConfig{Origin: scenario.Origin{
		Model: scenario.ModelConcurrency, Base: 20 * time.Millisecond, PerInflight: 20 * time.Millisecond, Replicas: 1,
	}})
	c := testClient(t)
	var mu sync.Mutex
	var longest time.Duration
	var wg sync.WaitGroup
	for i := range 5 {
		wg.Go(func() {
			time.Sleep(time.Duration(i) * 2 * time.Millisecond) // in flight: 0, 1, 2, 3, 4
			r := send(c, "GET", url, time.Second)
			mu.Lock()
			longest = max(longest, r.took)
			mu.Unlock()
		})
	}
	wg.Wait()
	if longest < 90*time.Millisecond {
		t.Errorf("the last of 5 concurrent requests took %v, want about 100ms (20ms + 4 × 20ms)", longest)
	}
}

func TestOriginWouldAnswer(t *testing.T) {
	org, url := startOrigin(t, OriginConfig{Origin: queueOrigin(1, 5)}) // 200 ms each
	if !org.WouldAnswer(time.Second) {
		t.Error("an idle origin would not answer")
	}
	c := testClient(t)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() { send(c, "GET", url, 3*time.Second) })
	}
	time.Sleep(60 * time.Millisecond)
	if org.WouldAnswer(250 * time.Millisecond) {
		t.Error("with one in service and three queued ahead (900 ms), it would answer within 250 ms")
	}
	if !org.WouldAnswer(2 * time.Second) {
		t.Error("with three queued ahead (900 ms), it would not answer within 2 s")
	}
	wg.Wait()
}

func TestOriginMetrics(t *testing.T) {
	_, url := startOrigin(t, OriginConfig{Origin: queueOrigin(1, 100)})
	c := testClient(t)
	send(c, "GET", url, time.Second, AttemptHeader, "retry")
	r := send(c, "GET", url+"/metrics", time.Second)
	if m := contains(r.body,
		`retrystorm_origin_requests_total{result="ok"} 1`,
		`retrystorm_origin_attempts_total{kind="retry"} 1`,
		"retrystorm_origin_queue_length", "retrystorm_origin_in_flight", "retrystorm_origin_workers_busy",
		"retrystorm_origin_request_duration_seconds_bucket", "retrystorm_origin_capacity 100",
		"retrystorm_origin_wasted_work_total", "retrystorm_origin_executions_total",
		"retrystorm_origin_duplicate_executions_total", "retrystorm_origin_idempotent_replays_total",
	); len(m) > 0 {
		t.Errorf("/metrics lacks %q", m)
	}
}

func TestNewOriginRefuses(t *testing.T) {
	for _, c := range []OriginConfig{
		{Origin: scenario.Origin{Model: "nope"}},
		{Origin: scenario.Origin{Model: scenario.ModelQueue, Capacity: 10}},
		{Origin: scenario.Origin{Model: scenario.ModelCapacity}},
		// A replica of an origin of two is 0 or 1 (each one server: see
		// replicas.go).
		{Origin: scenario.Origin{Model: scenario.ModelQueue, Capacity: 10, Workers: 2, Replicas: 2}, Replica: 2},
		{Origin: scenario.Origin{Model: scenario.ModelQueue, Capacity: 10, Workers: 2}, Replica: -1},
	} {
		if _, err := NewOrigin(c); err == nil {
			t.Errorf("NewOrigin(%+v, replica %d) accepted it", c.Origin, c.Replica)
		}
	}
}

// TestOriginOutageModes: an outage from 100 to 400 ms in each mode, and a
// request at 150 ms: refuse answers 503 at once; blackhole never answers;
// stall answers once the stall is over, and not before.
func TestOriginOutageModes(t *testing.T) {
	for _, mode := range []string{scenario.OutageRefuse, scenario.OutageBlackhole, scenario.OutageStall} {
		start := time.Now()
		org, url := startOrigin(t, OriginConfig{
			Origin: queueOrigin(1, 100), // 10 ms each
			Start:  start,
			Triggers: []scenario.Trigger{
				{Kind: scenario.TriggerOutage, At: 100 * time.Millisecond, For: 300 * time.Millisecond, Mode: mode},
			},
		})
		c := testClient(t)
		if r := send(c, "GET", url, time.Second); r.status != http.StatusOK {
			t.Fatalf("%s: before the outage: %d %v", mode, r.status, r.err)
		}
		time.Sleep(time.Until(start.Add(150 * time.Millisecond)))
		r := send(c, "GET", url, time.Second)
		at := time.Since(start)
		switch mode {
		case scenario.OutageRefuse:
			if r.status != http.StatusServiceUnavailable || !strings.Contains(r.body, "refused") || (!slow() && r.took > 50*time.Millisecond) {
				t.Errorf("refuse: %d %q after %v, want 503 refused at once", r.status, r.body, r.took)
			}
		case scenario.OutageBlackhole:
			if r.err == nil {
				t.Errorf("blackhole: answered %d after %v, want no answer until the client gives up", r.status, r.took)
			}
		case scenario.OutageStall:
			if r.status != http.StatusOK || at < 400*time.Millisecond {
				t.Errorf("stall: %d %v at %v, want 200 once the stall ends at 400ms", r.status, r.err, at)
			}
		}
		if mode == scenario.OutageStall {
			continue
		}
		// Neither refuse nor blackhole did work for it: the server is idle
		// after the outage.
		time.Sleep(time.Until(start.Add(400 * time.Millisecond)))
		if q := org.Queued(); q != 0 {
			t.Errorf("%s: %d queued after the outage, want 0", mode, q)
		}
	}
}

// TestOriginStallQueues: a stalled origin takes requests into its queue
// and answers none, rejections included, until the stall ends.
func TestOriginStallQueues(t *testing.T) {
	start := time.Now()
	o := queueOrigin(1, 100)
	o.QueueLimit = 2
	org, url := startOrigin(t, OriginConfig{
		Origin:   o,
		Start:    start,
		Triggers: []scenario.Trigger{{Kind: scenario.TriggerOutage, At: 50 * time.Millisecond, For: 300 * time.Millisecond, Mode: scenario.OutageStall}},
	})
	c := testClient(t)
	time.Sleep(time.Until(start.Add(100 * time.Millisecond)))
	var wg sync.WaitGroup
	replies := make([]reply, 4)
	for i := range replies {
		wg.Go(func() { replies[i] = send(c, "GET", url, 2*time.Second) })
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond)
	if q := org.Queued(); q != 2 {
		t.Errorf("during the stall: %d queued, want 2 (one in service, one rejected but not yet told)", q)
	}
	wg.Wait()
	ok, rejected := 0, 0
	for _, r := range replies {
		if r.took < 150*time.Millisecond {
			t.Errorf("answered %d after %v, before the stall ended", r.status, r.took)
		}
		switch r.status {
		case http.StatusOK:
			ok++
		case http.StatusServiceUnavailable:
			rejected++
		}
	}
	if ok != 3 || rejected != 1 {
		t.Errorf("%d answered and %d rejected, want 3 and 1 (a worker and a queue of 2)", ok, rejected)
	}
}

// TestOriginShedsByDeadline: behind resilhttp.Shed, with deadline shedding
// (200 ms of work each), a request whose propagated deadline is nearer
// than the work is refused on arrival, at once; one that waited until it
// could no longer be answered in time is refused when the worker frees up,
// not left to time out; neither costs work; and the Shedder's counts are
// on the origin's registry.
func TestOriginShedsByDeadline(t *testing.T) {
	// The checks allow late for the machine; a run in which the process
	// itself stalled for half of that is measured again (testlock.Timed).
	late := 80 * time.Millisecond
	if slow() {
		late = 300 * time.Millisecond
	}
	testlock.Timed(t, late/2, func() func() {
		o := queueOrigin(1, 5) // 200 ms each
		o.Shed = scenario.Shed{Deadline: true}
		org, url := startOrigin(t, OriginConfig{Origin: o})
		c := testClient(t)
		var wg sync.WaitGroup
		wg.Go(func() { send(c, "GET", url, 5*time.Second) }) // holds the worker 0-200 ms
		time.Sleep(10 * time.Millisecond)
		tooLate := send(c, "GET", url, 5*time.Second, TimeoutHeader, "100m")
		var doomed reply
		// Queued at 20 ms; at 200 ms it has 120 ms left for 200 ms of work.
		wg.Go(func() { doomed = send(c, "GET", url, 5*time.Second, TimeoutHeader, "300m") })
		time.Sleep(10 * time.Millisecond)
		last := send(c, "GET", url, 5*time.Second) // queued behind it
		wg.Wait()
		return func() {
			if tooLate.status != http.StatusServiceUnavailable || tooLate.header.Get(resilhttp.ShedHeader) != "too_late" || tooLate.took > late {
				t.Errorf("the request with 100 ms for 200 ms of work: %d %q after %v, want 503 too_late at once", tooLate.status, tooLate.header.Get(resilhttp.ShedHeader), tooLate.took)
			}
			if doomed.status != http.StatusServiceUnavailable || doomed.took > 200*time.Millisecond+late {
				t.Errorf("the request that waited too long: %d after %v, want 503 when the worker freed up, at about 180 ms", doomed.status, doomed.took)
			}
			if last.status != http.StatusOK || last.took > 400*time.Millisecond+late {
				t.Errorf("the next request: %d after %v, want 200 after about 370 ms (the refused ones cost nothing)", last.status, last.took)
			}
			if got := org.Counts(); got.Wasted != 0 {
				t.Errorf("counts %+v, want nothing wasted", got)
			}
			r := send(c, "GET", url+"/metrics", time.Second)
			if m := contains(r.body,
				`resil_shed_refused_total{name="origin",reason="too_late"} 1`,
				`retrystorm_origin_requests_total{result="shed"} 1`,
				`retrystorm_origin_requests_total{result="rejected"} 1`,
				`resil_shed_service_time_seconds{name="origin"} 0.2`,
			); len(m) > 0 {
				t.Errorf("/metrics lacks %q", m)
			}
		}
	})
}

// TestOriginLimit: with a fixed limit of one request held, the second
// request is refused at once by the middleware, whatever the queue would
// take.
func TestOriginLimit(t *testing.T) {
	o := queueOrigin(1, 5)
	o.Limit = scenario.Limit{Use: scenario.LimitFixed, Limit: 1}
	_, url := startOrigin(t, OriginConfig{Origin: o})
	c := testClient(t)
	var wg sync.WaitGroup
	var first reply
	wg.Go(func() { first = send(c, "GET", url, 5*time.Second) })
	time.Sleep(20 * time.Millisecond)
	second := send(c, "GET", url, 5*time.Second)
	wg.Wait()
	if first.status != http.StatusOK || second.status != http.StatusServiceUnavailable || second.header.Get(resilhttp.ShedHeader) != "limit" {
		t.Errorf("first %d, second %d %q: want 200, then 503 limit", first.status, second.status, second.header.Get(resilhttp.ShedHeader))
	}
	r := send(c, "GET", url+"/metrics", time.Second)
	if m := contains(r.body, `resil_concurrency_limit{name="origin"} 1`, `resil_shed_refused_total{name="origin",reason="limit"} 1`, `resil_shed_admitted_total{name="origin"} 1`); len(m) > 0 {
		t.Errorf("/metrics lacks %q", m)
	}
}
