package report

import (
	"fmt"
	"io"
	"strings"
)

// Claim is one statement an experiment makes about the numbers it just
// computed, and whether they bear it out. Measured is the evidence, in
// machine-readable form.
type Claim struct {
	Text     string `json:"text"`
	Holds    bool   `json:"holds"`
	Measured any    `json:"measured"`
	// Detail is the evidence in words, for people.
	Detail string `json:"-"`
}

// Check makes a claim from a condition and its evidence.
func Check(text string, holds bool, measured any, detailFormat string, args ...any) Claim {
	return Claim{Text: text, Holds: holds, Measured: measured, Detail: fmt.Sprintf(detailFormat, args...)}
}

// AllHold reports whether every claim holds.
func AllHold(cs []Claim) bool {
	for _, c := range cs {
		if !c.Holds {
			return false
		}
	}
	return true
}

// RenderClaims writes each claim: a check mark or a cross, the claim, and
// its evidence, wrapped to st.Width with the claim's lines indented under
// its first word.
func RenderClaims(w io.Writer, cs []Claim, st Style) error {
	var b strings.Builder
	for _, c := range cs {
		mark := st.wrap(ansiGreen, "✓ holds")
		if !c.Holds {
			mark = st.wrap(ansiRed, "✗ FAILS")
		}
		words := strings.Fields(c.Text)
		dim := make([]bool, len(words))
		if c.Detail != "" {
			detail := strings.Fields("(" + c.Detail + ")")
			words = append(words, detail...)
			for range detail {
				dim = append(dim, true)
			}
		}
		b.WriteString(wrapWords(words, dim, st.Width, mark+" ", "        " /* under the claim's first word */, st))
		b.WriteByte('\n')
	}
	_, err := io.WriteString(w, b.String())
	return err
}
