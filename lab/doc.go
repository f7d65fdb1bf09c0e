// Package lab reproduces a retry storm with real servers and real sockets
// on loopback, from the same scenario files as the simulator, and reports
// it in the simulator's terms (sim.Result: the same series, summaries,
// tables and charts), so that the two can be set side by side.
//
// Its parts are usable on their own, each an http.Handler or a function
// with its I/O passed in:
//
//   - Origin: an HTTP server with finite capacity: the simulator's origin
//     model (package origin: workers and a FIFO or LIFO queue, or the
//     capacity and concurrency models) on the wall clock, faults on a
//     schedule and through an admin endpoint, idempotency keys, and
//     wasted work when it serves requests whose client already left.
//   - Gateway: a reverse proxy whose outbound transport is resilhttp, one
//     resil.Guard per simulated client, with a fallback answer when a
//     breaker is open and deadlines propagated to the origin.
//   - RunLoad: an open-loop load generator with per-intent deadlines.
//   - Live: a page and a stream of server-sent events that plot a run as
//     it happens.
//   - Tally: the per-tick counts every part adds to.
//
// Over gRPC (Protocol, ProtocolGRPC) the same parts speak gRPC: the Origin
// also serves grpc.testing.TestService/UnaryCall on the same model (serve
// it with ListenGRPC), GRPCGateway proxies every call as raw frames through
// resilgrpc's client interceptors, and RunLoad calls UnaryCall.
//
// Measure puts them together on 127.0.0.1 for a scenario, in scaled time
// (see Scale): one tick of the scenario lasts ExperimentOptions.Tick of
// wall time, and judges the experiment's claims on what they measured. The origin and the gateway serve Prometheus metrics from
// registries of their own, the origin OpenTelemetry's server metrics
// besides, through OpenTelemetry's Prometheus exporter. docs/lab.md
// describes the lab, its measurements and how they compare with the
// simulator.
package lab
