// Package budget holds resil's retry budgets: what pays for retries and
// hedges, so that a fleet's retries stay a bounded share of its traffic
// however many clients it has and however badly the dependency fails.
//
// Each is a [resil.Budget] that a [resil.Policy] (and so a [resil.Guard],
// the simulator, the lab and the page) drives with the time passed in:
//
//   - [TokenBucket], the retry budget: a share of the traffic (Ratio of
//     every success or every request, per [Funding]) funds retries, with a
//     floor and a cap;
//   - [Window], the same over a sliding time window, as Finagle, Envoy's
//     retry budgets, Gateway API GEP-3388 and (with Tower) Linkerd count;
//   - [GRPCThrottle], gRPC's retry throttling (gRFC A6);
//   - [AWSQuota], the AWS SDKs' retry quota (standard mode);
//   - [Concurrency], Envoy's retry budget: retries in flight at most a share
//     of the requests in flight;
//   - [None], the control, which allows every retry.
//
// [ClientRateLimiter], the AWS SDKs' client-side rate limiter, is no
// budget but the [resil.Pacer] that goes with the AWS quota in the SDKs'
// adaptive mode.
//
// Every settings type documents its zero value and its defaults; its
// WithDefaults method returns the settings with the defaults filled in,
// and its Validate method reports what the constructor would refuse, so
// that a program that reads settings from a file (retrystorm's scenario
// files do) keeps no copy of either. A budget the constructor did not make
// (a zero value, or the nil pointer a failed constructor returns) grants
// no retry, and [resil.Policy.Validate] refuses it (see [Built]).
//
// The optional interfaces ([UsesTime], [InFlight], [RetryShare],
// [TokenReporter], [Built]) are the methods a Policy and a Guard look for
// on a budget, beside the four of [resil.Budget]; a budget written
// elsewhere implements those that mean something to it.
//
// Like resil, this package imports only the standard library (and resil).
package budget
