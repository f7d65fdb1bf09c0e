package resil

// Outcome is how one attempt ended, as the budget and the breaker see it.
// The zero value is OutcomeSuccess. A plain value, safe to copy and share.
type Outcome uint8

const (
	// OutcomeSuccess is an answer the caller accepts.
	OutcomeSuccess Outcome = iota
	// OutcomeFailure is an error, an overload rejection or a 5xx answer.
	OutcomeFailure
	// OutcomeTimeout is no answer within the attempt's time.
	OutcomeTimeout
	// OutcomeIgnored counts as neither success nor failure: the caller cancelled, or
	// the error says nothing about the dependency's health.
	OutcomeIgnored
	// OutcomeThrottled is an overload rejection that says so (HTTP 429,
	// AWS's Throttling error codes, gRPC RESOURCE_EXHAUSTED). Budgets and
	// breakers count it as an OutcomeFailure; a [Pacer] slows
	// down on it.
	OutcomeThrottled
)

var outcomeNames = [...]string{"success", "failure", "timeout", "ignored", "throttled"}

// String returns the outcome's lower-case name.
func (o Outcome) String() string {
	return enumString("Outcome", outcomeNames[:], uint8(o))
}

// Failed reports whether the outcome counts against the dependency, as
// budgets and breakers count it: OutcomeFailure, OutcomeTimeout and
// OutcomeThrottled.
func (o Outcome) Failed() bool {
	return o == OutcomeFailure || o == OutcomeTimeout || o == OutcomeThrottled
}
