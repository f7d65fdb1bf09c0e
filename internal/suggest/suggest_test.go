package suggest

import (
	"fmt"
	"testing"
)

func TestClosest(t *testing.T) {
	keys := []string{"max_retries", "idempotent_only", "backoff"}
	for word, want := range map[string]string{
		"maxRetries":  "max_retries",
		"max-retries": "max_retries",
		"max_retry":   "max_retries",
		"backof":      "backoff",
		"Backoff":     "backoff",
		"colour":      "",
		"b":           "",
		"bakcoff":     "backoff", // two neighbours swapped: one typo
	} {
		if got := Closest(word, keys); got != want {
			t.Errorf("Closest(%q) = %q, want %q", word, got, want)
		}
	}
}

func TestEditDistance(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want int
	}{
		{"", "", 0},
		{"", "abc", 3},
		{"abc", "", 3},
		{"storm", "storm", 0},
		{"strom", "storm", 1},
		{"storm", "stork", 1},
		{"fleet", "fleets", 1},
		{"ca", "abc", 3},
		{"kitten", "sitting", 3},
	} {
		if got := editDistance(c.a, c.b); got != c.want {
			t.Errorf("editDistance(%q, %q) = %d, want %d", c.a, c.b, got, c.want)
		}
		if got := editDistance(c.b, c.a); got != c.want {
			t.Errorf("editDistance(%q, %q) = %d, want %d (not symmetric)", c.b, c.a, got, c.want)
		}
	}
}

func TestOneOf(t *testing.T) {
	for _, c := range []struct {
		words []string
		want  string
	}{
		{nil, "nothing"},
		{[]string{"a"}, "a"},
		{[]string{"a", "b"}, "a or b"},
		{[]string{"a", "b", "c"}, "a, b or c"},
	} {
		if got := OneOf(c.words); got != c.want {
			t.Errorf("OneOf(%q) = %q, want %q", c.words, got, c.want)
		}
	}
}

func ExampleClosest() {
	commands := []string{"storm", "fleets", "jitter", "breaker"}
	fmt.Printf("%q %q\n", Closest("strom", commands), Closest("colour", commands))
	// Output: "storm" ""
}
