// Package admission is resil's server side: it decides which requests a
// server takes, so that an overloaded server answers the requests it can in
// time rather than all of them too late.
//
// Three decision cores, each on injected time, as resil's client policies
// are:
//
//   - a [DeadlineShedder] refuses work whose caller's deadline has passed,
//     or is too near for its service time (which it may learn);
//   - a [Limiter] caps the requests in flight, with a fixed limit or one
//     learned from latency and drops; the type of its settings chooses the
//     algorithm: [FixedLimit], [AIMDLimit], [GradientLimit] or [VegasLimit];
//   - a [WaitQueue] lets a bounded number wait for a bounded time, in
//     FIFO, LIFO or adaptive-LIFO order.
//
// A simulator's origin calls them on virtual time; a [Shedder] is their
// blocking driver for real servers, transport-neutral: resil/resilhttp's
// Shed middleware and resil/resilgrpc's interceptors call the same
// [Shedder.Admit] and [Shedder.Done]. A refusal is a [ShedError], which
// errors.Is matches to [ErrShed] and whose [ShedReason] says why.
//
// Like resil, this package imports the standard library only (and resil).
package admission
