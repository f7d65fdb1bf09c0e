package lab

import (
	"fmt"
	"math"
	"os"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"time"

	"github.com/retrystorm/retrystorm/scenario"
)

// The lab measures a service by the clock: an intent sent late, or a
// server's timer that wakes late, is a number the service never caused.
// On a busy machine (other processes, or the lab's own load past what its
// cores serve) both happen, and the verdicts that follow are about the
// machine. So the lab watches itself while every fleet runs and, past
// these bounds, reports the run inconclusive instead of judging it
// (docs/lab.md, "When the lab is not measuring").
const (
	// LateShare bounds the 99th percentile of lateness, of the load
	// generator's sends and of the timers of the lab's servers (gateway,
	// fault proxy, origin, which share one process and one scheduler), as
	// a share of the shortest of the wall-clock tick and the fleets'
	// scaled timeouts: a fifth of a timeout late moves attempts across
	// the line between answered and timed out.
	LateShare = 0.2
	// StallShare bounds the longest a timer of the lab's process woke
	// late, one stall, as a share of the shortest of the fleets' scaled
	// timeouts (the tick, without one). Everything in the process waits
	// out a stall together, and then an attempt's deadline and its answer
	// race: the whole timeout (the bound until 2026-12) let claims fail
	// in runs whose longest stall was 95-99 ms against timeouts of 100
	// ms, with two busy loops beside the lab's tests (BENCHMARKS.md).
	StallShare = 0.5
	// MinLateBound is the least lateness bound: a timer wake-up and a
	// loopback hop cost a millisecond on an idle machine.
	MinLateBound = 2 * time.Millisecond
	// CPUShare bounds the lab's own CPU time, as a share of the cores it
	// may use: past it the lab is at its own ceiling, and what it
	// measures is itself.
	CPUShare = 0.9
	// ServiceShare bounds the lab's own share of every request's latency
	// (the mean lateness of its timers plus the mean wait of its
	// goroutines for the scheduler), as a share of the origin's service
	// time in wall time, when the origin's admission learns from
	// latency (a gradient or vegas limit, or aimd with a slow_rtt): such
	// a limit shrinks when requests take longer than they did, whatever
	// made them, so what the lab adds must stay well inside the
	// gradient's tolerance (1.5 by default) and vegas' queue of a few.
	ServiceShare = 0.2
	// watchPeriod is how often the watch's timer wakes to see how late
	// it is.
	watchPeriod = 5 * time.Millisecond
)

// ExitInconclusive is the exit status of a lab run that could not
// measure (DESIGN.md: beside 0 holds, 1 fails, 2 bad input).
const ExitInconclusive = 3

// WatchStats is what the lab saw of itself while a fleet ran.
type WatchStats struct {
	// TimerLateP99 and TimerLateMax are how late a timer of the lab's
	// process woke, every watchPeriod, in seconds: what the gateway's
	// backoffs, the proxy's and the origin's clocks suffered too.
	TimerLateP99 float64 `json:"timer_late_p99_seconds"`
	TimerLateMax float64 `json:"timer_late_max_seconds"`
	// TimerLateMean is their mean: what a latency averaged over many
	// requests (an adaptive limit's window) gains from the lab itself.
	TimerLateMean float64 `json:"timer_late_mean_seconds"`
	// SchedLatP99 and SchedLatMean are how long the lab's goroutines
	// (every handler, every client) waited, ready to run, for the Go
	// scheduler to run them (runtime/metrics /sched/latencies:seconds):
	// a wait each hop of each request pays on top of its service.
	SchedLatP99  float64 `json:"sched_latency_p99_seconds"`
	SchedLatMean float64 `json:"sched_latency_mean_seconds"`
	// GCPauseMax is the longest stop-the-world pause of the garbage
	// collector (/sched/pauses/total/gc:seconds), to within its
	// histogram's bucket.
	GCPauseMax float64 `json:"gc_pause_max_seconds"`
	// Cores is how many cores the lab may use (GOMAXPROCS, at most the
	// machine's); LabCPU is the share of them it used; MachineBusy the
	// share of the machine's cores busy with anything (the lab
	// included), where the system says (Linux), else absent.
	Cores       int      `json:"cores"`
	LabCPU      *float64 `json:"lab_cpu_share,omitempty"`
	MachineBusy *float64 `json:"machine_busy_share,omitempty"`
}

// Inconclusive is why a lab run judged nothing, and what would let it.
type Inconclusive struct {
	// Reasons, one per fleet and instrument past its bound, with the
	// numbers.
	Reasons []string `json:"reasons"`
	// LateBoundSeconds, StallBoundSeconds and CPUShare are the bounds
	// the run was held to.
	LateBoundSeconds  float64 `json:"late_bound_seconds"`
	StallBoundSeconds float64 `json:"stall_bound_seconds"`
	// ServiceBoundSeconds bounds the lab's own latency per request, when
	// the origin's admission learns from latency; absent otherwise.
	ServiceBoundSeconds float64 `json:"service_bound_seconds,omitempty"`
	CPUShare            float64 `json:"cpu_share_bound"`
	// SuggestedTickSeconds is a wall-clock tick the lab expects to hold
	// (0 when none within its range would: see Suggestion).
	SuggestedTickSeconds float64 `json:"suggested_tick_seconds"`
	// Shards, when the lab's own CPU was the limit, is how many load
	// processes (--shard i/n, on machines of their own) would carry the
	// run at its tick; 0 otherwise.
	Shards int `json:"shards,omitempty"`
	// Suggestion says it in words.
	Suggestion string `json:"suggestion"`
}

// SuggestedTick is the suggestion as a duration.
func (in *Inconclusive) SuggestedTick() time.Duration {
	return time.Duration(in.SuggestedTickSeconds * float64(time.Second))
}

// watch measures the lab while a fleet runs: its timers' lateness and
// the CPU time of the process and of the machine.
type watch struct {
	stop, done chan struct{}
	late       reservoir
	max, sum   float64
	n          int
	rt0        []metrics.Sample
	began      time.Time
	cpu0       time.Duration
	cpuOK      bool
	stat0      cpuStat
	statOK     bool
}

func startWatch(seed uint64) *watch {
	w := &watch{stop: make(chan struct{}), done: make(chan struct{}), began: time.Now()}
	w.late.init(4096, seed)
	w.cpu0, w.cpuOK = processCPU()
	w.stat0, w.statOK = readCPUStat()
	w.rt0 = readRuntime()
	go w.run()
	return w
}

func (w *watch) run() {
	defer close(w.done)
	timer := time.NewTimer(watchPeriod)
	defer timer.Stop()
	due := time.Now().Add(watchPeriod)
	for {
		select {
		case <-w.stop:
			return
		case <-timer.C:
		}
		late := max(0, time.Since(due).Seconds())
		w.late.add(late)
		w.max = max(w.max, late)
		w.sum += late
		w.n++
		due = time.Now().Add(watchPeriod)
		timer.Reset(watchPeriod)
	}
}

// finish stops the watch and returns what it saw.
func (w *watch) finish() WatchStats {
	close(w.stop)
	<-w.done
	wall := time.Since(w.began).Seconds()
	s := WatchStats{Cores: min(runtime.GOMAXPROCS(0), runtime.NumCPU()), TimerLateMax: w.max}
	s.TimerLateP99 = w.late.quantiles(0.99)[0]
	if w.n > 0 {
		s.TimerLateMean = w.sum / float64(w.n)
	}
	rt := readRuntime()
	if d := histDelta(w.rt0[0], rt[0]); d != nil {
		s.SchedLatP99, s.SchedLatMean = d.quantile(0.99), d.mean()
	}
	if d := histDelta(w.rt0[1], rt[1]); d != nil {
		s.GCPauseMax = d.max()
	}
	if cpu, ok := processCPU(); ok && w.cpuOK && wall > 0 {
		share := round3((cpu - w.cpu0).Seconds() / (wall * float64(s.Cores)))
		s.LabCPU = &share
	}
	if st, ok := readCPUStat(); ok && w.statOK {
		if busy, ok := st.busySince(w.stat0); ok {
			busy = round3(busy)
			s.MachineBusy = &busy
		}
	}
	return s
}

// The runtime's histograms the watch reads: the scheduler's latencies
// and the collector's pauses.
var runtimeMetrics = []string{"/sched/latencies:seconds", "/sched/pauses/total/gc:seconds"}

func readRuntime() []metrics.Sample {
	s := make([]metrics.Sample, len(runtimeMetrics))
	for i, name := range runtimeMetrics {
		s[i].Name = name
	}
	metrics.Read(s)
	return s
}

// hist is what a cumulative runtime histogram gained between two reads:
// counts[i] values in [buckets[i], buckets[i+1]).
type hist struct {
	counts  []uint64
	buckets []float64
	total   uint64
}

// histDelta is b less a, or nil when the runtime has no such histogram
// or nothing was added.
func histDelta(a, b metrics.Sample) *hist {
	if a.Value.Kind() != metrics.KindFloat64Histogram || b.Value.Kind() != metrics.KindFloat64Histogram {
		return nil
	}
	ha, hb := a.Value.Float64Histogram(), b.Value.Float64Histogram()
	if len(ha.Counts) != len(hb.Counts) {
		return nil
	}
	d := &hist{counts: make([]uint64, len(hb.Counts)), buckets: hb.Buckets}
	for i := range hb.Counts {
		if hb.Counts[i] > ha.Counts[i] {
			d.counts[i] = hb.Counts[i] - ha.Counts[i]
			d.total += d.counts[i]
		}
	}
	if d.total == 0 {
		return nil
	}
	return d
}

// value is a representative of bucket i: its middle, or its finite edge.
func (h *hist) value(i int) float64 {
	lo, hi := h.buckets[i], h.buckets[i+1]
	switch {
	case math.IsInf(lo, -1):
		return max(hi, 0)
	case math.IsInf(hi, 1):
		return lo
	}
	return (lo + hi) / 2
}

// quantile is the upper edge of the bucket holding the q-quantile (the
// finite lower edge for the last): an overestimate by at most a bucket.
func (h *hist) quantile(q float64) float64 {
	rank := uint64(math.Ceil(q * float64(h.total)))
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank && c > 0 {
			if hi := h.buckets[i+1]; !math.IsInf(hi, 1) {
				return hi
			}
			return h.buckets[i]
		}
	}
	return 0
}

func (h *hist) mean() float64 {
	var sum float64
	for i, c := range h.counts {
		sum += float64(c) * h.value(i)
	}
	return sum / float64(h.total)
}

func (h *hist) max() float64 {
	for i := len(h.counts) - 1; i >= 0; i-- {
		if h.counts[i] > 0 {
			return h.value(i)
		}
	}
	return 0
}

func round3(x float64) float64 { return math.Round(x*1000) / 1000 }

// cpuStat is the machine's CPU time, all cores, in the kernel's ticks.
type cpuStat struct{ busy, total uint64 }

// readCPUStat reads /proc/stat's first line (Linux); false elsewhere.
func readCPUStat() (cpuStat, bool) {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return cpuStat{}, false
	}
	line, _, _ := strings.Cut(string(data), "\n")
	f := strings.Fields(line)
	if len(f) < 5 || f[0] != "cpu" {
		return cpuStat{}, false
	}
	var st cpuStat
	for i, x := range f[1:] {
		n, err := strconv.ParseUint(x, 10, 64)
		if err != nil {
			return cpuStat{}, false
		}
		if i >= 8 { // guest time is counted in user time already
			break
		}
		st.total += n
		if i != 3 && i != 4 { // idle, iowait
			st.busy += n
		}
	}
	return st, true
}

// busySince is the share of the machine's CPU time busy since s0.
func (s cpuStat) busySince(s0 cpuStat) (float64, bool) {
	if s.total <= s0.total || s.busy < s0.busy {
		return 0, false
	}
	return float64(s.busy-s0.busy) / float64(s.total-s0.total), true
}

// serviceBound is the most the lab may add to a request's latency on
// average, for an origin o at scale (wall seconds per scenario second):
// ServiceShare of its service time when its admission learns from
// latency, else 0 (no bound).
func serviceBound(o scenario.Origin, scale float64) time.Duration {
	l := o.Limit
	learns := l.Use == scenario.LimitGradient || l.Use == scenario.LimitVegas || (l.Use == scenario.LimitAIMD && l.SlowRTT > 0)
	if !learns {
		return 0
	}
	return max(time.Duration(ServiceShare*scale*float64(o.ServiceEstimate())), 0)
}

// lateBound is the most lateness (99th percentile) the lab accepts at a
// wall-clock tick of tick, whose fleets' shortest scaled timeout is
// timeout (0: none).
func lateBound(tick, timeout time.Duration) time.Duration {
	d := tick
	if timeout > 0 {
		d = min(d, timeout)
	}
	return max(time.Duration(LateShare*float64(d)), MinLateBound)
}

// stallBound is the longest one stall of the lab's timers may be at a
// wall-clock tick of tick, whose fleets' shortest scaled timeout is
// timeout (0: none).
func stallBound(tick, timeout time.Duration) time.Duration {
	d := tick
	if timeout > 0 {
		d = timeout
	}
	return max(time.Duration(StallShare*float64(d)), MinLateBound)
}

// judge returns why the run of info cannot be trusted, or nil: a fleet
// whose load generator or timers were late past bound at the 99th
// percentile, whose timers once stalled longer than stall (stallBound:
// a stall fails attempts by itself, and one failure in a tick after the
// trigger can push recovery out by tens of ticks), that added more than
// service (ServiceShare of the origin's service time, when its admission
// learns from latency; 0: unbounded) to its requests' latency on
// average, or that kept the lab's
// cores busy past CPUShare. The suggestion is a tick long enough for the
// lateness and the CPU seen to fit, within [tick, maxTick].
func judge(info *Info, tick, bound, stall, service, maxTick time.Duration) *Inconclusive {
	in := &Inconclusive{LateBoundSeconds: bound.Seconds(), StallBoundSeconds: stall.Seconds(), ServiceBoundSeconds: service.Seconds(), CPUShare: CPUShare}
	b := bound.Seconds()
	late, cpu := 1.0, 0.0 // how much longer a tick would fit the lateness, the CPU
	for _, f := range info.Fleets {
		l, w := f.Load, f.Watch
		var what []string
		if l.LateP99 > b {
			what = append(what, fmt.Sprintf("the load generator sent intents %.1f ms late at the 99th percentile (at most %.0f ms)", 1000*l.LateP99, 1000*l.LateMax))
			late = max(late, l.LateP99/b)
		}
		if w.TimerLateP99 > b {
			what = append(what, fmt.Sprintf("the timers of its servers (gateway, proxy, origin) woke %.1f ms late at the 99th percentile (at most %.0f ms)", 1000*w.TimerLateP99, 1000*w.TimerLateMax))
			late = max(late, w.TimerLateP99/b)
		} else if st := stall.Seconds(); w.TimerLateMax > st {
			what = append(what, fmt.Sprintf("the lab stalled once for %.0f ms, past %.0f ms (half an attempt's timeout, or a tick's without one), and %.1f ms at the 99th percentile", 1000*w.TimerLateMax, 1000*st, 1000*w.TimerLateP99))
			late = max(late, w.TimerLateMax/st)
		}
		if len(what) > 0 {
			what = []string{fmt.Sprintf("%s, past the bound of %.1f ms", strings.Join(what, " and "), 1000*b)}
		}
		// The lab's share of each request's latency: a timer of the
		// origin's clock that wakes late answers late, and each hop's
		// goroutine waits for the scheduler once more.
		if own, sb := w.TimerLateMean+w.SchedLatMean, service.Seconds(); sb > 0 && own > sb {
			what = append(what, fmt.Sprintf("it added %.2f ms to every request's latency on average (timers %.2f ms late, goroutines %.2f ms waiting to run), past %.2f ms, a fifth of the origin's service time: its adaptive limit would learn the lab's lateness", 1000*own, 1000*w.TimerLateMean, 1000*w.SchedLatMean, 1000*sb))
			late = max(late, own/sb)
		}
		var reason string
		if len(what) > 0 {
			reason = fmt.Sprintf("%s: %s", f.Name, strings.Join(what, "; "))
		}
		if w.LabCPU != nil {
			// Work per wall second goes as 1/tick: this much longer a
			// tick leaves the lab a third of its cores spare.
			cpu = max(cpu, *w.LabCPU/(CPUShare*2/3))
			if *w.LabCPU > CPUShare {
				if reason == "" {
					reason = f.Name + ": "
				} else {
					reason += "; "
				}
				reason += fmt.Sprintf("the lab kept %.0f%% of its %s busy, past %.0f%%: it measured its own ceiling", 100**w.LabCPU, cores(w.Cores), 100*CPUShare)
			}
		}
		if reason == "" {
			continue
		}
		if w.LabCPU != nil && *w.LabCPU <= CPUShare {
			reason += fmt.Sprintf("; the lab used %.0f%% of the %s it may use", 100**w.LabCPU, cores(w.Cores))
		}
		if w.MachineBusy != nil {
			reason += fmt.Sprintf("; the machine's %s were %.0f%% busy", cores(runtime.NumCPU()), 100**w.MachineBusy)
		}
		in.Reasons = append(in.Reasons, reason)
	}
	if len(in.Reasons) == 0 {
		return nil
	}
	// Lateness others cause does not shrink with a longer tick but the
	// bound grows with it: half as much again, for a margin.
	factor := max(2, 1.5*max(late, cpu))
	next := niceTick(time.Duration(factor * float64(tick)))
	var alt string
	if cpu > 1 {
		// The lab's own CPU was the limit: the load split over machines
		// of their own would hold this tick.
		in.Shards = int(math.Ceil(cpu))
		alt = fmt.Sprintf(", or keep the tick and split the clients over %d load processes on machines of their own (--shard i/%d, then merge)", in.Shards, in.Shards)
	}
	if next <= maxTick {
		in.SuggestedTickSeconds = next.Seconds()
		in.Suggestion = fmt.Sprintf("run it again with --tick %s (--auto-tick does), or on a quieter machine%s", Short(next), alt)
	} else {
		in.Suggestion = fmt.Sprintf("no tick up to %s, the longest the run may take, would hold it (it needs about %s): run it on a quieter machine, or with fewer intents per second%s", Short(maxTick), Short(next), alt)
	}
	return in
}

func cores(n int) string {
	if n == 1 {
		return "1 core"
	}
	return fmt.Sprintf("%d cores", n)
}

// niceTick rounds d up to two significant digits of milliseconds.
func niceTick(d time.Duration) time.Duration {
	ms := float64(d) / float64(time.Millisecond)
	if ms <= 10 {
		return time.Duration(math.Ceil(ms)) * time.Millisecond
	}
	p := math.Pow(10, math.Floor(math.Log10(ms))-1)
	return time.Duration(math.Ceil(ms/p)*p) * time.Millisecond
}
