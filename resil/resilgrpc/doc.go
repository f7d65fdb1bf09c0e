// Package resilgrpc guards gRPC clients and servers with resil.
//
// # Client
//
// A [Client] holds a unary and a stream client interceptor that run every
// call under a [resil.Guard]: retries paid from its budget (any kind: a
// token bucket, gRPC's throttle, ...), its breaker, backoff with jitter, the
// per-attempt timeout, the caller's deadline, hedged unary calls under the
// same budget, and fallbacks. Every decision is the Guard's; what gRPC adds
// is decided here:
//
//   - Which status codes are retried ([Method].RetryCodes, UNAVAILABLE by
//     default), which count as the server failing (FailureCodes: by
//     default the codes retried, as resilhttp counts statuses) and which
//     are answers that say nothing of its health (INTERNAL when it is not
//     retried, INVALID_ARGUMENT, ...: neither success nor failure, as gRFC
//     A6's throttle counts them).
//     DEADLINE_EXCEEDED of the caller's own deadline is never retried.
//   - Server pushback: the trailer grpc-retry-pushback-ms replaces the
//     backoff and is still paid from the budget; a negative or malformed
//     one stops the retries (gRFC A6).
//   - Commit points: a call whose response headers or first message
//     arrived is never retried, nor is a stream whose replay buffer
//     overflowed.
//   - Idempotency per method (Method.Idempotency, [ProtoIdempotency]) or
//     per call ([Idempotent], [NotIdempotent], [WithKey], [Once]): a call
//     that is not idempotent is never retried unless it carries a key.
//   - Retries and hedges carry grpc-previous-rpc-attempts.
//   - What comes after the interceptors (an inner interceptor, the
//     invoker) sees each attempt's resil.Attempt on its context:
//     [AttemptOf]. A call that failed returns an error that keeps resil's:
//     status.Code reads the status the caller should see, and
//     resil.ReasonOf why the Guard stopped.
//
// Install it with [Client.DialOptions], which also turns grpc-go's own
// retries off: they would run inside each attempt, outside the budget.
//
// # Service configs
//
// [FromServiceConfig] builds the settings a gRPC service config means
// (read by package grpcconfig): the same attempts, backoff, codes and
// throttling as grpc-go's built-in retries, so that a team can switch and
// then add a budget or a breaker.
//
// # Server
//
// A [Server] holds server interceptors that shed calls whose propagated
// deadline leaves less than they need, before the handler runs, with
// UNAVAILABLE and a pushback that asks the client not to retry. The
// decisions are resil's ([admission.DeadlineShedder]); with
// ServerSettings.Shedder, a [admission.Shedder] also caps the calls in flight
// with its (adaptive) concurrency limit and wait queue, exactly as
// resilhttp.Shed does for HTTP.
//
// # Load balancing
//
// [NewBalancerBuilder] makes a grpc-go load-balancing policy, a
// balancer.Builder to register and name in a service config, whose picker
// is one of resil/balance's (round robin, random, P2C, least request, peak
// EWMA) and whose outlier detection is resil/outlier's, gRPC's rules
// (gRFC A50) or Envoy's. grpc-go's balancer API is the natural home: the
// policy is built as grpc-go v1.85.0 builds its own round_robin and
// least_request (an endpointsharding balancer with a pick_first child per
// endpoint), and an RPC's end reaches the detector through the pick's
// Done, where grpc-go's outlier_detection policy counts it. That policy
// (internal/xds/balancer/outlierdetection) wraps another policy instead,
// and hides the SubConns it ejects from it; it is internal to grpc-go and
// configured only through xDS or a service config, so resil's detector,
// whose rules the simulator shares, is folded into the picker here rather
// than wrapped around grpc-go's.
package resilgrpc
