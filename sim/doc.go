// Package sim is retrystorm's deterministic simulator: fleets of clients
// built from resil's own Policy, driven with virtual time, against a model
// of an origin with finite capacity, through the triggers of a scenario.
//
// It is a discrete-event simulation. Each fleet replays the same open-loop
// stream of intents on its own copy of the origin; every client has its
// own budget and breaker. The run keeps ground truth for every attempt: the
// outcome of attempts a breaker refused is drawn too, without touching the
// origin, so the answers a breaker threw away are counted, not estimated.
//
// Randomness comes from the scenario's seed alone: arrivals from a stream
// shared by every fleet, jitter from a stream of each fleet's own, and the
// facts of each intent and attempt (idempotent, broken key, error, replica)
// from a hash of (seed, intent, attempt), so the same seed gives the same
// result byte for byte.
//
// Memory stays flat in the length of a run: an intent's and an attempt's
// slots are reused as soon as they end, and latencies go to a fixed-size
// histogram.
package sim
