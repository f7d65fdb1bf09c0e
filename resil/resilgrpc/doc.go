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
package resilgrpc
