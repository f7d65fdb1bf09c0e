package sim

import (
	"math"
	"strings"
	"testing"
)

// poolTiers: an app tier whose calls to the database take a connection of
// a pool of 5 per app replica; the database slows down for 5s.
const poolTiers = `
name: pool
seed: 9
duration: 40s
tick: 1s
traffic: {rate: 100, arrivals: poisson, clients: 10}
origin: {model: queue, capacity: 400, workers: 20}
tiers:
  - name: app
    server: {model: queue, capacity: 10000, workers: 50, replicas: 2}
    client: {timeout: 1s, budget: {use: none}, pool: {size: 5, wait_timeout: 200ms}}
triggers:
  - {kind: latency, at: 10s, for: 5s, factor: 20}
fleets:
  - name: users
    timeout: 2s
    retry: {max_retries: 1}
    budget: {use: none}
`

// TestPool: while the database is slow, the calls hold their connections
// longer, the pools run dry, and the calls that wait past the pool's wait
// timeout are refused without reaching the database; every request to a
// pool ends one way.
func TestPool(t *testing.T) {
	_, r := runYAML(t, poolTiers)
	db := r.Fleets[0].Tiers[1]
	p := db.Pool
	if p == nil {
		t.Fatal("no pool result for the calls into the database")
	}
	if p.Requests != db.Summary.Attempts {
		t.Errorf("%d requests to the pools, %d attempts into the database layer", p.Requests, db.Summary.Attempts)
	}
	if p.Waited == 0 || p.WaitTimeouts == 0 {
		t.Errorf("the slow database emptied no pool: %+v", *p)
	}
	inUse := p.Series.InUse
	if inUse[5] >= 10 || inUse[12] != 10 {
		t.Errorf("connections in use before and during the slowdown: %d, %d (want under 10, then all 10)", inUse[5], inUse[12])
	}
	// Calls refused by the pool never reach the database: its servers
	// saw fewer requests than the calls' attempts.
	if served := db.Summary.Goodput + db.Summary.WastedWork; served > p.Acquired {
		t.Errorf("the database answered %d requests, more than the %d connections handed out", served, p.Acquired)
	}
	// A queue that refuses: with a queue limit of 1, the rest are refused at once.
	_, r = runYAML(t, strings.Replace(poolTiers, "wait_timeout: 200ms", "queue_limit: 1", 1))
	if p := r.Fleets[0].Tiers[1].Pool; p.Rejected == 0 || p.WaitTimeouts != 0 {
		t.Errorf("a pool with a queue of 1: %+v", *p)
	}
}

// TestClosedLoop: 20 clients, each thinking 100ms after an intent that
// takes 10ms, send 20/0.11 intents a second; and when the origin slows,
// they send fewer: a closed loop offers less to a slow system.
func TestClosedLoop(t *testing.T) {
	const y = `
name: closed
duration: 30s
traffic: {arrivals: closed, clients: 20, think: 100ms}
origin: {model: queue, capacity: 1000, workers: 10}
triggers:
  - {kind: latency, at: 10s, for: 10s, factor: 20}
fleets:
  - name: users
    timeout: 1s
    budget: {use: none}
`
	_, r := runYAML(t, y)
	s := r.Fleets[0].Series
	want := 20 / 0.11
	if got := float64(s.Intents[5]); math.Abs(got-want) > 0.05*want {
		t.Errorf("%v intents a tick at rest, want about %.0f", got, want)
	}
	if slow := float64(s.Intents[15]); slow > want/2 {
		t.Errorf("%v intents a tick while the origin is 20 times slower: a closed loop should offer far less", slow)
	}
	if r.Fleets[0].Summary.Ceiling != nil {
		t.Error("a closed loop has no steady rate, so no ceiling")
	}
}

// TestPartition: a partition of the link from the fleet to its cache
// loses every attempt over it while it lasts: they time out.
func TestPartition(t *testing.T) {
	f, _ := cacheRun(t, "{kind: flush, at: 10s}", "{kind: partition, from: users, to: cache, at: 10s, for: 5s}")
	s := f.Series
	if s.Goodput[12] != 0 || s.Goodput[8] == 0 || s.Goodput[20] == 0 {
		t.Errorf("goodput before, during and after the partition: %d, %d, %d", s.Goodput[8], s.Goodput[12], s.Goodput[20])
	}
	if f.Summary.Timeouts == 0 {
		t.Error("no attempt timed out behind the partition")
	}
}

// TestBurstRampCPU: a burst adds its intents to its tick; a ramp rises
// linearly; a CPU cut of one replica of two halves that replica's pace.
func TestBurstRampCPU(t *testing.T) {
	const y = `
name: shapes
duration: 20s
traffic: {rate: 100, ramp: {from: 0, for: 10s}}
origin: {model: queue, capacity: 1000, workers: 10, replicas: 2}
triggers:
  - {kind: burst, at: 15s, for: 100ms, count: 50}
  - {kind: cpu, at: 12s, for: 2s, share: 0.05, replica: 1}
fleets:
  - name: users
    timeout: 1s
    budget: {use: none}
`
	_, r := runYAML(t, y)
	s := r.Fleets[0].Series
	for k, want := range map[int]int64{0: 0, 5: 50, 9: 90, 11: 100, 15: 150} {
		if got := s.Intents[k]; got < want-1 || got > want+1 {
			t.Errorf("tick %d: %d intents, want %d", k, got, want)
		}
	}
	// Replica 1 at 5% of its CPU serves 25 requests a second and its
	// requests take 100ms: those sent to it queue, and the answers late.
	if s.Queue[12] == 0 || s.Queue[18] != 0 {
		t.Errorf("queue during and after the CPU cut: %d, %d", s.Queue[12], s.Queue[18])
	}
}
