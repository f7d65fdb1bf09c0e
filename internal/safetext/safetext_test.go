package safetext

import "testing"

func TestNameAndEscape(t *testing.T) {
	for _, c := range []struct{ in, name, escaped string }{
		{"storm.yaml", "storm.yaml", "storm.yaml"},
		{"tempête é.yaml", "tempête é.yaml", "tempête é.yaml"},
		{"嵐.yaml", "嵐.yaml", "嵐.yaml"},
		{"\x1b[41mEVIL\x1b[0m.yaml", `"\x1b[41mEVIL\x1b[0m.yaml"`, `\x1b[41mEVIL\x1b[0m.yaml`},
		{"a\u202eb", `"a\u202eb"`, `a\u202eb`},
		{"a\nb\tc", `"a\nb\tc"`, `a\nb\tc`},
		{"x\xffy", `"x\xffy"`, `x\xffy`},
		{"zero\u200bwidth", `"zero\u200bwidth"`, `zero\u200bwidth`},
		{`say "hi"`, `say "hi"`, `say "hi"`},
	} {
		if got := Name(c.in); got != c.name {
			t.Errorf("Name(%q) = %s, want %s", c.in, got, c.name)
		}
		if got := Escape(c.in); got != c.escaped {
			t.Errorf("Escape(%q) = %s, want %s", c.in, got, c.escaped)
		}
	}
}
