package admission

import (
	"encoding"
	"fmt"
	"strings"
	"testing"
)

// textEnum is an enum whose words come from one table.
type textEnum interface {
	fmt.Stringer
	encoding.TextMarshaler
}

// TestEnumText: every value of this package's enums (as resil's own TestEnumText) marshals to its String, reads
// back as itself, and the first value past the table has no name; an
// unknown word is refused with the list of words.
func TestEnumText(t *testing.T) {
	check := func(name string, n int, value func(i int) textEnum, parse func([]byte) (textEnum, error)) {
		t.Run(name, func(t *testing.T) {
			for i := range n {
				v := value(i)
				b, err := v.MarshalText()
				if err != nil || string(b) != v.String() {
					t.Fatalf("%s(%d): MarshalText %q, %v; String %q", name, i, b, err, v.String())
				}
				back, err := parse(b)
				if err != nil || back != v {
					t.Fatalf("%s(%d): %q reads back as %v, %v", name, i, b, back, err)
				}
			}
			if b, err := value(n).MarshalText(); err == nil {
				t.Fatalf("%s(%d): MarshalText %q, want an error", name, n, b)
			}
			_, err := parse([]byte("Nope"))
			if err == nil || !strings.Contains(err.Error(), `resil: `+name+` = Nope: want one of `+value(0).String()) {
				t.Fatalf("%s: unknown word: %v", name, err)
			}
		})
	}
	check("LimitAlgorithm", 4, func(i int) textEnum { return LimitAlgorithm(i) }, func(b []byte) (textEnum, error) { var v LimitAlgorithm; err := v.UnmarshalText(b); return v, err })
	check("Discipline", 3, func(i int) textEnum { return Discipline(i) }, func(b []byte) (textEnum, error) { var v Discipline; err := v.UnmarshalText(b); return v, err })
	check("ShedReason", int(NumShedReasons), func(i int) textEnum { return ShedReason(i) }, func(b []byte) (textEnum, error) { var v ShedReason; err := v.UnmarshalText(b); return v, err })
}
