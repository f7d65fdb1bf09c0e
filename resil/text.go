package resil

import (
	"fmt"
	"strings"
)

// The words of resil's enums. Each type keeps one table of names, indexed
// by value, and its String, MarshalText and UnmarshalText all read it (as
// slog.Level does), so a configuration file, a metric label, a header and a
// log line spell a value the same way, and a program that reads settings
// from text takes its vocabulary from here rather than keeping its own.

// enumString is the name of value v of type typ, or "typ(v)" when v has
// none.
func enumString(names []string, v uint8, typ string) string {
	if int(v) < len(names) {
		return names[v]
	}
	return fmt.Sprintf("%s(%d)", typ, v)
}

// enumText is MarshalText's answer: the name, or an error for a value
// without one.
func enumText(names []string, v uint8, typ string) ([]byte, error) {
	if int(v) < len(names) {
		return []byte(names[v]), nil
	}
	return nil, fmt.Errorf("resil: %s(%d) has no name", typ, v)
}

// enumParse is UnmarshalText's: the value named text, exactly (case
// included), or an error that lists the names.
func enumParse(names []string, text []byte, typ string) (uint8, error) {
	for i, n := range names {
		if string(text) == n {
			return uint8(i), nil
		}
	}
	return 0, fmt.Errorf("resil: unknown %s %q (want %s)", typ, text, oneOf(names))
}

// parseEnum sets *p to the value named text, or leaves it and returns
// enumParse's error.
func parseEnum[T ~uint8](p *T, names []string, text []byte, typ string) error {
	v, err := enumParse(names, text, typ)
	if err == nil {
		*p = T(v)
	}
	return err
}

// oneOf returns "a", "a or b", or "a, b or c".
func oneOf(words []string) string {
	if len(words) < 2 {
		return strings.Join(words, "")
	}
	return strings.Join(words[:len(words)-1], ", ") + " or " + words[len(words)-1]
}

// MarshalText returns the schedule's name: "none", "fixed" or
// "exponential".
func (s Schedule) MarshalText() ([]byte, error) {
	return enumText(scheduleNames[:], uint8(s), "Schedule")
}

// UnmarshalText sets s to the schedule text names.
func (s *Schedule) UnmarshalText(text []byte) error {
	return parseEnum(s, scheduleNames[:], text, "Schedule")
}

// MarshalText returns the jitter's name: "none", "full", "equal",
// "decorrelated" or "factor".
func (j Jitter) MarshalText() ([]byte, error) { return enumText(jitterNames[:], uint8(j), "Jitter") }

// UnmarshalText sets j to the jitter text names.
func (j *Jitter) UnmarshalText(text []byte) error {
	return parseEnum(j, jitterNames[:], text, "Jitter")
}

// MarshalText returns the funding's name: "unset", "success" or "request".
func (f Funding) MarshalText() ([]byte, error) {
	return enumText(fundingNames[:], uint8(f), "Funding")
}

// UnmarshalText sets f to the funding text names. "unset" reads as
// FundingUnset, which every budget's settings refuse.
func (f *Funding) UnmarshalText(text []byte) error {
	return parseEnum(f, fundingNames[:], text, "Funding")
}

// MarshalText returns the scope's name: "all" or "retries".
func (s Scope) MarshalText() ([]byte, error) { return enumText(scopeNames[:], uint8(s), "Scope") }

// UnmarshalText sets s to the scope text names.
func (s *Scope) UnmarshalText(text []byte) error {
	return parseEnum(s, scopeNames[:], text, "Scope")
}

// MarshalText returns the rule's name: "consecutive", "count_window" or
// "time_window".
func (r TripRule) MarshalText() ([]byte, error) {
	return enumText(ruleNames[:], uint8(r), "TripRule")
}

// UnmarshalText sets r to the rule text names.
func (r *TripRule) UnmarshalText(text []byte) error {
	return parseEnum(r, ruleNames[:], text, "TripRule")
}

// MarshalText returns the state's name: "closed", "open" or "half-open".
func (s State) MarshalText() ([]byte, error) { return enumText(stateNames[:], uint8(s), "State") }

// UnmarshalText sets s to the state text names.
func (s *State) UnmarshalText(text []byte) error {
	return parseEnum(s, stateNames[:], text, "State")
}

// MarshalText returns the kind's name: "first", "retry" or "hedge".
func (k Kind) MarshalText() ([]byte, error) { return enumText(kindNames[:], uint8(k), "Kind") }

// UnmarshalText sets k to the kind text names.
func (k *Kind) UnmarshalText(text []byte) error {
	return parseEnum(k, kindNames[:], text, "Kind")
}

// MarshalText returns the outcome's name: "success", "failure", "timeout"
// or "ignored".
func (o Outcome) MarshalText() ([]byte, error) {
	return enumText(outcomeNames[:], uint8(o), "Outcome")
}

// UnmarshalText sets o to the outcome text names.
func (o *Outcome) UnmarshalText(text []byte) error {
	return parseEnum(o, outcomeNames[:], text, "Outcome")
}

// MarshalText returns the idempotency's name: "unset", "idempotent" or
// "not_idempotent".
func (i Idempotency) MarshalText() ([]byte, error) {
	return enumText(idempotencyNames[:], uint8(i), "Idempotency")
}

// UnmarshalText sets i to the idempotency text names.
func (i *Idempotency) UnmarshalText(text []byte) error {
	return parseEnum(i, idempotencyNames[:], text, "Idempotency")
}

// MarshalText returns the kind's snake_case name, as String does for the
// kinds that have one.
func (k EventKind) MarshalText() ([]byte, error) {
	return enumText(eventNames[:], uint8(k), "EventKind")
}

// UnmarshalText sets k to the event kind text names.
func (k *EventKind) UnmarshalText(text []byte) error {
	return parseEnum(k, eventNames[:], text, "EventKind")
}

// MarshalText returns the reason's name, as String does.
func (r StopReason) MarshalText() ([]byte, error) {
	return enumText(stopNames[:], uint8(r), "StopReason")
}

// UnmarshalText sets r to the reason text names.
func (r *StopReason) UnmarshalText(text []byte) error {
	return parseEnum(r, stopNames[:], text, "StopReason")
}
