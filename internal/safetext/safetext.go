// Package safetext makes text from outside (file names, keys of a file,
// values typed by a user) safe to print on a terminal or in a page: no
// control character, escape sequence, invisible or direction-changing
// character gets through raw.
package safetext

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Printable reports whether s is valid UTF-8 made of printable characters
// only: letters, marks, numbers, punctuation, symbols and the ASCII space
// (unicode.IsPrint).
func Printable(s string) bool {
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if (r == utf8.RuneError && size == 1) || !unicode.IsPrint(r) {
			return false
		}
		i += size
	}
	return true
}

// Name returns a name (a file's, a key's) ready to print: as it is when it
// is Printable, and quoted in Go syntax otherwise (as %q would), so that a
// name holding an escape sequence, a newline or a right-to-left override
// shows what it holds.
func Name(s string) string {
	if Printable(s) {
		return s
	}
	return strconv.Quote(s)
}

// Escape returns s with every character that is not printable, and every
// byte that is not UTF-8, replaced by its Go escape (\x1b, \u202e), and
// the rest as it is: for a message that may quote outside text.
func Escape(s string) string {
	if Printable(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if (r == utf8.RuneError && size == 1) || !unicode.IsPrint(r) {
			q := strconv.QuoteToASCII(s[i : i+size])
			b.WriteString(q[1 : len(q)-1])
		} else {
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}
