package importer

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// An HAProxy configuration file, read as HAProxy 2.6 reads it
// (src/cfgparse.c, parse_line and readcfgfile, at v2.6.0): one keyword
// and its arguments per line, separated by spaces or tabs; "#" outside
// quotes begins a comment; a word may be quoted with " (in which \ escapes
// the next character) or ' (in which nothing is escaped); outside quotes a
// backslash escapes the next character. A section begins at a line whose
// keyword names one (global, defaults, frontend, backend, listen, and the
// others below), whatever its indentation, and lasts until the next.

// hapLine is one line's words.
type hapLine struct {
	Words []string
	Line  int
}

// hapSection is one section: its keyword, its name (maybe empty), the
// defaults section it takes its settings from ("from NAME", 2.4 and
// later), and its lines.
type hapSection struct {
	Kind, Name, From string
	Line             int
	Lines            []hapLine
}

// hapSectionKinds are the keywords that begin a section.
var hapSectionKinds = map[string]bool{
	"global": true, "defaults": true, "frontend": true, "backend": true, "listen": true,
	"peers": true, "resolvers": true, "userlist": true, "mailers": true, "cache": true,
	"program": true, "http-errors": true, "ring": true, "log-forward": true,
}

// Bounds on one HAProxy file, beside maxFileBytes.
const (
	hapMaxLines = 200_000 // lines with words
	hapMaxWords = 1024    // words on one line
)

// errHAProxySyntax is what every syntax error of an HAProxy file matches
// with errors.Is.
var errHAProxySyntax = errors.New("haproxy syntax")

type hapError struct {
	file string
	line int
	msg  string
}

func (e *hapError) Error() string { return fmt.Sprintf("%s:%d: %s", e.file, e.line, e.msg) }
func (e *hapError) Unwrap() error { return errHAProxySyntax }

// parseHAProxy reads an HAProxy configuration file into its sections.
func parseHAProxy(file string, data []byte) ([]*hapSection, error) {
	if len(data) > maxFileBytes {
		return nil, fmt.Errorf("%s: %d bytes: larger than the %d a config file may be", file, len(data), maxFileBytes)
	}
	var out []*hapSection
	n := 0
	for i, raw := range strings.Split(string(data), "\n") {
		words, err := hapWords(raw)
		if err != nil {
			return nil, &hapError{file, i + 1, err.Error()}
		}
		if len(words) == 0 {
			continue
		}
		if n++; n > hapMaxLines {
			return nil, &hapError{file, i + 1, fmt.Sprintf("more than %d lines: not a configuration file", hapMaxLines)}
		}
		if len(words) > hapMaxWords {
			return nil, &hapError{file, i + 1, fmt.Sprintf("more than %d words on a line", hapMaxWords)}
		}
		if hapSectionKinds[words[0]] {
			s := &hapSection{Kind: words[0], Line: i + 1}
			rest := words[1:]
			if len(rest) > 0 && rest[0] != "from" {
				s.Name, rest = rest[0], rest[1:]
			}
			if len(rest) == 2 && rest[0] == "from" {
				s.From = rest[1]
			} else if len(rest) > 0 {
				return nil, &hapError{file, i + 1, fmt.Sprintf("%s %s: unexpected %q (want: %s NAME [from DEFAULTS])", s.Kind, s.Name, strings.Join(rest, " "), s.Kind)}
			}
			out = append(out, s)
			continue
		}
		if len(out) == 0 {
			return nil, &hapError{file, i + 1, fmt.Sprintf("unknown keyword %q out of any section", words[0])}
		}
		s := out[len(out)-1]
		s.Lines = append(s.Lines, hapLine{Words: words, Line: i + 1})
	}
	return out, nil
}

// hapWords splits one line into its words.
func hapWords(line string) ([]string, error) {
	var words []string
	var b strings.Builder
	in, quoted := byte(0), false
	flush := func() {
		if b.Len() > 0 || quoted {
			words = append(words, b.String())
		}
		b.Reset()
		quoted = false
	}
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case in == '\'':
			if c == '\'' {
				in = 0
			} else {
				b.WriteByte(c)
			}
		case in == '"':
			switch {
			case c == '"':
				in = 0
			case c == '\\' && i+1 < len(line):
				i++
				b.WriteByte(line[i])
			default:
				b.WriteByte(c)
			}
		case c == '"' || c == '\'':
			in, quoted = c, true
		case c == '\\' && i+1 < len(line):
			i++
			b.WriteByte(line[i])
		case c == '#':
			flush()
			return words, nil
		case c == ' ' || c == '\t' || c == '\r':
			flush()
		default:
			b.WriteByte(c)
		}
	}
	if in != 0 {
		return nil, fmt.Errorf("unmatched quote %c", in)
	}
	flush()
	return words, nil
}

// hapTime reads a time as HAProxy does (parse_time_err): a number and an
// optional unit, us, ms, s, m, h or d; a number alone is in milliseconds.
func hapTime(s string) (time.Duration, error) {
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	if i == 0 || i > 12 {
		return 0, fmt.Errorf("%q is not a time", s)
	}
	n, _ := strconv.ParseInt(s[:i], 10, 64)
	unit := map[string]time.Duration{"": time.Millisecond, "us": time.Microsecond, "ms": time.Millisecond,
		"s": time.Second, "m": time.Minute, "h": time.Hour, "d": 24 * time.Hour}[s[i:]]
	if unit == 0 {
		return 0, fmt.Errorf("%q: unknown unit %q", s, s[i:])
	}
	if float64(n)*float64(unit) > math.MaxInt32*float64(time.Millisecond) {
		return 0, fmt.Errorf("%q: too long (HAProxy takes at most 2147483647ms)", s)
	}
	return time.Duration(n) * unit, nil
}
