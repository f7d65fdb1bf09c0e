package admission

import (
	"fmt"
	"strings"

	"github.com/retrystorm/retrystorm/resil"
)

// The words of this package's enums, read as resil's are: one table of
// names per type, which String, MarshalText and UnmarshalText share.

func enumString(typ string, names []string, v uint8) string {
	if int(v) < len(names) {
		return names[v]
	}
	return fmt.Sprintf("%s(%d)", typ, v)
}

func enumText(typ string, names []string, v uint8) ([]byte, error) {
	if int(v) < len(names) {
		return []byte(names[v]), nil
	}
	return nil, badSetting(typ, v, "unknown value")
}

func parseEnum(typ string, names []string, b []byte) (uint8, error) {
	for i, n := range names {
		if string(b) == n {
			return uint8(i), nil
		}
	}
	return 0, badSetting(typ, string(b), "want one of "+strings.Join(names, ", "))
}

func badSetting(field string, value any, reason string) error {
	return &resil.SettingError{Field: field, Value: value, Reason: reason}
}

// MarshalText returns the algorithm's word: "fixed", "aimd", "gradient" or
// "vegas".
func (a LimitAlgorithm) MarshalText() ([]byte, error) {
	return enumText("LimitAlgorithm", limitNames[:], uint8(a))
}

// UnmarshalText sets a to the algorithm text names.
func (a *LimitAlgorithm) UnmarshalText(text []byte) error {
	n, err := parseEnum("LimitAlgorithm", limitNames[:], text)
	if err == nil {
		*a = LimitAlgorithm(n)
	}
	return err
}

// MarshalText returns the discipline's word: "fifo", "lifo" or
// "adaptive_lifo".
func (d Discipline) MarshalText() ([]byte, error) {
	return enumText("Discipline", disciplineNames[:], uint8(d))
}

// UnmarshalText sets d to the discipline text names.
func (d *Discipline) UnmarshalText(text []byte) error {
	n, err := parseEnum("Discipline", disciplineNames[:], text)
	if err == nil {
		*d = Discipline(n)
	}
	return err
}

// MarshalText returns the reason's word, as String does.
func (r ShedReason) MarshalText() ([]byte, error) {
	return enumText("ShedReason", shedNames[:], uint8(r))
}

// UnmarshalText sets r to the shed reason text names.
func (r *ShedReason) UnmarshalText(text []byte) error {
	n, err := parseEnum("ShedReason", shedNames[:], text)
	if err == nil {
		*r = ShedReason(n)
	}
	return err
}
