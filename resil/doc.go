// Package resil stops retry storms: a retry budget, a circuit breaker,
// backoff with jitter, idempotent-only retries, pushback, hedging under the
// same budget, and the retries/requests signal to alert on.
//
// # One decision core, several drivers
//
// Every policy here is a state machine that takes the time as an argument:
// [TokenBucket.Withdraw], [Breaker.Allow] and [Backoff.Delay] never read a
// clock and never draw from a global random source. [Policy] composes them
// into the decisions of one guarded call (may the first attempt go, may this
// failure be retried, after how long, may a hedge go), again with the time
// and the random source passed in. [Guard.Do] is the blocking driver of that
// core for production code; the retrystorm simulator drives the very same
// [Policy] with virtual time, so what you simulate is what you ship.
//
// # Why a budget
//
// A per-request retry count multiplies by a client count nobody chose: when
// every request fails at once, three retries each mean four times the load on
// a dependency that is already failing. A retry budget bounds the aggregate:
// retries may be at most a ratio r of the traffic that funds the bucket, so a
// fleet's offered load stays near (1+r) times normal however many clients it
// has. The price is paid in intents: a budget refuses retries that would have
// rescued some calls. Measure both, failures and intents lost.
//
// # Adapters
//
// HTTP lives in resil/resilhttp (an http.RoundTripper) and Prometheus in
// resil/resilprom, so this package depends on the standard library alone.
package resil
