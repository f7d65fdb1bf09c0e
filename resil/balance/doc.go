// Package balance picks the replica for each request: round robin,
// random, the power of two choices on least requests, least request, and
// peak-EWMA latency, each aware of the hosts an outlier detector ejected.
//
// # The model
//
// A picker serves a fixed set of hosts, numbered 0 to n-1. [RoundRobin.Pick]
// (and each picker's Pick) chooses a host for a request starting at now and
// counts it in flight; Done reports its end, its latency and its
// [resil.Outcome], and must be called once per successful Pick. The rules:
//
//   - [RoundRobin]: the healthy hosts in turn (Envoy ROUND_ROBIN, gRPC
//     round_robin, without weights).
//   - [Random]: a healthy host drawn uniformly (Envoy RANDOM).
//   - [P2C]: two independent random draws, the one with fewer requests in
//     flight, the first on a tie (Envoy LEAST_REQUEST, choice_count 2:
//     source/extensions/load_balancing_policies/least_request).
//   - [LeastRequest]: the fewest in flight over every host (Envoy's
//     enable_full_scan), ties broken by a random starting host.
//   - [PeakEWMA]: two random hosts, the one of lower cost = latency
//     estimate × (in flight + 1), as tower's PeakEwma, which Linkerd's
//     proxy balances with (linkerd2-proxy linkerd/proxy/balance, decay 10s
//     and default RTT 30ms from linkerd/app/outbound/src/http/logical/
//     profile.rs at commit 29637b64) and Finagle's
//     PeakEwma: a latency above the decayed estimate replaces it at once,
//     a lower one moves it with weight 1 − exp(−elapsed/decay), and the
//     estimate decays toward zero between answers (linkerd/ewma/src/lib.rs:
//     add_peak, add and get_at).
//
// # Ejections and the panic threshold
//
// With Settings.Detector set, Pick leaves out the hosts it has ejected
// (outlier.Detector.Ejected), unless fewer hosts are healthy than Envoy's
// healthy panic threshold allows (outlier.Panic: default 50%; Envoy's rule
// for one priority, overprovisioning factor 1.4): then every host may be
// picked again, ejected or not, which is how ejections and retries can turn
// a partial failure back into a full one. NoPanic turns that off, as gRPC
// has none: with every host ejected, Pick fails with [ErrNoHost].
//
// # Time, randomness, concurrency
//
// Time is an argument; no picker reads a clock. The random pickers draw
// one seed from Settings.Rand and then a splitmix64 sequence on an atomic
// counter, so that Pick takes no lock and a picker used from one goroutine
// repeats its choices for the same seed. In-flight counts are atomics, one
// cache line per host; PeakEWMA keeps each host's estimate under a lock of
// its own. Pick plus Done allocates nothing.
//
// A pick reads the detector without a lock while ejections change under
// it: it counts the ejected hosts, then walks them, and between the two
// hosts may be ejected and returned. A pick that finds no host checks the
// detector's version (outlier.Detector.Version, a sequence lock) and picks
// again if the ejections changed meanwhile, so that Pick fails with
// ErrNoHost only when one state of the detector had no host to pick,
// never because healthy hosts were each seen at a moment they were out
// (TestPicksWhileEjectionsChange). A pick that found a host returns it,
// even if that host was ejected an instant later.
//
// # Zero values
//
// The zero [Settings] is invalid (Hosts is required); PanicThreshold's zero
// is Envoy's 50, Decay's 10s, DefaultRTT's 30ms. The zero value of every
// picker fails closed: Pick returns resil.ErrNotBuilt, Done does nothing.
//
// # What is approximated
//
// No host weights, priorities, localities or slow start; P2C and PeakEWMA
// draw their two hosts independently (Envoy's rule; tower draws two
// distinct ones); Random and P2C skip an ejected draw by drawing again, and
// count to the k-th healthy host after four misses; RoundRobin's turn is
// one counter over the healthy hosts, so an ejection shifts the turn
// rather than rebuilding the list as Envoy and gRPC do.
package balance
