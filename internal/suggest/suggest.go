// Package suggest finds the word a user most likely meant: the scenario
// loader uses it for misspelt keys and values, the command line for
// misspelt commands and flags, so that both say "did you mean" the same way.
package suggest

import "strings"

// Closest returns the candidate that word was most likely meant to be, or
// "" when none is close. Case, '-' and '_' are ignored first, so that
// "maxRetries" and "max-retries" find max_retries; then an edit distance of
// at most a third of the word (and at least 1) is a typo.
func Closest(word string, candidates []string) string {
	norm := func(s string) string {
		return strings.NewReplacer("_", "", "-", "").Replace(strings.ToLower(s))
	}
	if len(word) > 64 { // not a typo, and too long to compare cheaply
		return ""
	}
	best, bestDist := "", max(1, len(word)/3)+1
	for _, c := range candidates {
		if norm(c) == norm(word) {
			return c
		}
		if d := editDistance(strings.ToLower(word), c); d < bestDist {
			best, bestDist = c, d
		}
	}
	return best
}

// editDistance is the optimal string alignment distance between a and b,
// in bytes: insertions, deletions, substitutions and swaps of two
// neighbours each cost 1, so that "strom" is one typo away from "storm".
func editDistance(a, b string) int {
	// Three rows: the one before the previous is needed for swaps.
	prev2 := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}

// OneOf returns "a", "a or b", or "a, b or c".
func OneOf(words []string) string {
	switch len(words) {
	case 0:
		return "nothing"
	case 1:
		return words[0]
	}
	return strings.Join(words[:len(words)-1], ", ") + " or " + words[len(words)-1]
}
