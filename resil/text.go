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
func enumString(typ string, names []string, v uint8) string {
	if int(v) < len(names) {
		return names[v]
	}
	return fmt.Sprintf("%s(%d)", typ, v)
}

// enumText returns the word of an enum value, or an error for a value
// that has none.
func enumText(typ string, names []string, v uint8) ([]byte, error) {
	if int(v) < len(names) {
		return []byte(names[v]), nil
	}
	return nil, badSetting(typ, v, "unknown value")
}

// parseEnum reads the word of an enum value: one of names, exactly.
func parseEnum(typ string, names []string, b []byte) (uint8, error) {
	for i, n := range names {
		if string(b) == n {
			return uint8(i), nil
		}
	}
	return 0, badSetting(typ, string(b), "want one of "+strings.Join(names, ", "))
}

// MarshalText returns the schedule's name: "none", "fixed" or
// "exponential".
func (s Schedule) MarshalText() ([]byte, error) {
	return enumText("Schedule", scheduleNames[:], uint8(s))
}

// UnmarshalText sets s to the schedule text names.
func (s *Schedule) UnmarshalText(text []byte) error {
	n, err := parseEnum("Schedule", scheduleNames[:], text)
	if err == nil {
		*s = Schedule(n)
	}
	return err
}

// MarshalText returns the jitter's name: "none", "full", "equal",
// "decorrelated" or "factor".
func (j Jitter) MarshalText() ([]byte, error) { return enumText("Jitter", jitterNames[:], uint8(j)) }

// UnmarshalText sets j to the jitter text names.
func (j *Jitter) UnmarshalText(text []byte) error {
	n, err := parseEnum("Jitter", jitterNames[:], text)
	if err == nil {
		*j = Jitter(n)
	}
	return err
}

// MarshalText returns the scope's name: "all" or "retries".
func (s Scope) MarshalText() ([]byte, error) { return enumText("Scope", scopeNames[:], uint8(s)) }

// UnmarshalText sets s to the scope text names.
func (s *Scope) UnmarshalText(text []byte) error {
	n, err := parseEnum("Scope", scopeNames[:], text)
	if err == nil {
		*s = Scope(n)
	}
	return err
}

// MarshalText returns the rule's name: "consecutive", "count_window" or
// "time_window".
func (r TripRule) MarshalText() ([]byte, error) {
	return enumText("TripRule", ruleNames[:], uint8(r))
}

// UnmarshalText sets r to the rule text names.
func (r *TripRule) UnmarshalText(text []byte) error {
	n, err := parseEnum("TripRule", ruleNames[:], text)
	if err == nil {
		*r = TripRule(n)
	}
	return err
}

// MarshalText returns the state's name: "closed", "open" or "half-open".
func (s State) MarshalText() ([]byte, error) { return enumText("State", stateNames[:], uint8(s)) }

// UnmarshalText sets s to the state text names.
func (s *State) UnmarshalText(text []byte) error {
	n, err := parseEnum("State", stateNames[:], text)
	if err == nil {
		*s = State(n)
	}
	return err
}

// MarshalText returns the kind's name: "first", "retry" or "hedge".
func (k Kind) MarshalText() ([]byte, error) { return enumText("Kind", kindNames[:], uint8(k)) }

// UnmarshalText sets k to the kind text names.
func (k *Kind) UnmarshalText(text []byte) error {
	n, err := parseEnum("Kind", kindNames[:], text)
	if err == nil {
		*k = Kind(n)
	}
	return err
}

// MarshalText returns the outcome's name: "success", "failure", "timeout"
// or "ignored".
func (o Outcome) MarshalText() ([]byte, error) {
	return enumText("Outcome", outcomeNames[:], uint8(o))
}

// UnmarshalText sets o to the outcome text names.
func (o *Outcome) UnmarshalText(text []byte) error {
	n, err := parseEnum("Outcome", outcomeNames[:], text)
	if err == nil {
		*o = Outcome(n)
	}
	return err
}

// MarshalText returns the idempotency's name: "unset", "idempotent" or
// "not_idempotent".
func (i Idempotency) MarshalText() ([]byte, error) {
	return enumText("Idempotency", idempotencyNames[:], uint8(i))
}

// UnmarshalText sets i to the idempotency text names.
func (i *Idempotency) UnmarshalText(text []byte) error {
	n, err := parseEnum("Idempotency", idempotencyNames[:], text)
	if err == nil {
		*i = Idempotency(n)
	}
	return err
}

// MarshalText returns the kind's snake_case name, as String does for the
// kinds that have one.
func (k EventKind) MarshalText() ([]byte, error) {
	return enumText("EventKind", eventNames[:], uint8(k))
}

// UnmarshalText sets k to the event kind text names.
func (k *EventKind) UnmarshalText(text []byte) error {
	n, err := parseEnum("EventKind", eventNames[:], text)
	if err == nil {
		*k = EventKind(n)
	}
	return err
}

// MarshalText returns the reason's name, as String does.
func (r StopReason) MarshalText() ([]byte, error) {
	return enumText("StopReason", stopNames[:], uint8(r))
}

// UnmarshalText sets r to the reason text names.
func (r *StopReason) UnmarshalText(text []byte) error {
	n, err := parseEnum("StopReason", stopNames[:], text)
	if err == nil {
		*r = StopReason(n)
	}
	return err
}
