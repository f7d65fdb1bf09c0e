// Package outlier ejects the hosts of a replica set that fail more than
// the others, with Envoy's rules or gRPC's (gRFC A50).
//
// # The model
//
// A [Detector] watches a fixed set of hosts, numbered 0 to n-1. Every
// request's end is recorded with [Detector.Record] as a [Result]: an answer
// that is not a 5xx, a 5xx, a gateway error (502, 503, 504), or no answer at
// all (a local-origin failure). Two kinds of rule turn those into
// ejections:
//
//   - Consecutive rules (Envoy only) eject a host at once when its
//     count of errors in a row reaches a threshold: Consecutive5xx (every
//     5xx), ConsecutiveGatewayFailure (502, 503, 504) and, when
//     SplitExternalLocalOriginErrors keeps failures to reach the host apart
//     from its answers, ConsecutiveLocalOriginFailure. Any success resets
//     the count; a non-gateway 5xx resets the gateway count.
//   - Interval rules run every Interval ([Detector.Advance]) over the
//     requests of the interval just ended. Success rate: among the hosts
//     with at least SuccessRateRequestVolume requests, if there are at least
//     SuccessRateMinimumHosts of them, a host whose success rate is below
//     mean − SuccessRateStdevFactor × stdev is an outlier. Failure
//     percentage: among the hosts with at least
//     FailurePercentageRequestVolume requests, if there are at least
//     FailurePercentageMinimumHosts, a host whose failure percentage is at
//     least (gRPC: above) FailurePercentageThreshold is an outlier. With the
//     split, Envoy runs both again over local-origin results.
//
// An outlier is ejected if two checks pass. First the max ejection
// percentage ([MayEject]): today Envoy ejects only if
// 100 × (ejected + 1) / hosts ≤ MaxEjectionPercent ([CheckAfter]); before
// 2023 it ejected if 100 × ejected / hosts < MaxEjectionPercent
// ([CheckBefore]), which lets the first ejection through whatever the
// percentage and can overshoot it (3 hosts at 67%: all three go), and gRPC
// still does; AlwaysEjectOneHost (Envoy, 2024) lets one ejection through
// when none is in force. Then the rule's enforcement percentage: a draw from
// Settings.Rand in [0, 100) must fall below it.
//
// An ejection lasts BaseEjectionTime × m, capped at MaxEjectionTime, where
// the multiplier m grows by one at each ejection and falls by one at each
// evaluation the host spends in service (Envoy: once it has been back for
// an Interval). Ejected hosts come back only at an evaluation: Envoy's at
// the first evaluation at or after the end of their time (plus Envoy's
// optional jitter), gRPC's at the first one strictly after it. A host is
// ejected from the balancer's choice, not from the counts: its requests
// still count if a balancer in panic mode sends it some.
//
// [Panic] is the other half of the rule a balancer applies: below Envoy's
// healthy panic threshold (default 50% of hosts healthy) the balancer
// ignores ejections and sends to every host, so ejecting too much turns a
// partial failure back into a full one. Package resil/balance applies it.
//
// # Time, randomness, concurrency
//
// Time is an argument: the detector reads no clock, and Advance runs every
// evaluation due by the time it is given, each at its own time. The
// enforcement draws and the jitter come from Settings.Rand. Record takes no
// lock and allocates nothing unless a consecutive rule reaches its
// threshold; [Detector.Ejected] and [Detector.EjectedCount] are atomic
// loads, so a balancer may ask on every pick.
//
// # Zero values
//
// The zero [Settings] is invalid (Hosts is required); its other zero fields
// mean what they say (a zero threshold is a rule turned off, a zero
// percentage never ejects), except the durations, whose zero is the
// upstream default. [EnvoyDefaults] and [GRPCDefaults] give each product's
// defaults. The zero [Detector] fails closed: it counts nothing, Advance and
// Record return resil.ErrNotBuilt, and every host reads as ejected.
//
// # Sources, and what is approximated
//
// The rules are read from Envoy's source/common/upstream/
// outlier_detection_impl.cc (commit 00c7146d, 2025; the 2023 change in PRs
// 27624 and 27909, always_eject_one_host in PR 34796), its
// api/envoy/config/cluster/v3/outlier_detection.proto defaults,
// load_balancer_impl.cc's isHostSetInPanic and recalculatePerPriorityPanic,
// gRFC A50 (grpc/proposal A50-xds-outlier-detection.md) and grpc-go's
// internal/xds/balancer/outlierdetection/balancer.go (v1.85.0-dev,
// commit 4793ad04). The tests cite each rule. Left out or approximated:
// one priority level and no host weights or degraded hosts; hosts are a
// fixed set (no membership changes, no active health checks that return a
// host early, no runtime overrides, no extension monitors); Envoy visits
// hosts in hash-map order and this package in index order, which matters
// only when the max ejection percentage stops an evaluation half-way; gRPC
// considers ejected hosts for the interval rules (they rarely have the
// volume), this package does not; and Envoy posts a consecutive ejection
// to its main thread, where this package ejects within Record.
package outlier
