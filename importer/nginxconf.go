package importer

import (
	"errors"
	"fmt"
	"strings"
)

// An nginx configuration file, read as nginx's own parser reads it
// (src/core/ngx_conf_file.c, ngx_conf_parse and ngx_conf_read_token, at
// release-1.22.1): a directive is a name and its arguments separated by
// white space and ended by ";", or followed by a block in braces; "#"
// begins a comment at the start of a word; a word may be quoted with " or
// ', in which \" and \' (and \\) stand for the quote (and the backslash);
// outside quotes a backslash escapes the next character. Variables and
// the directives' meanings are the importer's business, not the
// parser's.

// ngxDirective is one directive of an nginx configuration.
type ngxDirective struct {
	Name  string
	Args  []string
	Line  int
	Block []*ngxDirective // its block's directives; nil for a simple directive
	block bool            // it has a block (maybe empty)
}

// Bounds on one nginx file, beside maxFileBytes: a configuration is small.
const (
	ngxMaxDepth      = 50      // blocks inside blocks
	ngxMaxDirectives = 200_000 // directives in one file
	ngxMaxArgs       = 1024    // arguments of one directive
)

// errNginxSyntax is what every syntax error of an nginx file matches with
// errors.Is.
var errNginxSyntax = errors.New("nginx syntax")

// ngxError is a syntax error at a line of a file.
type ngxError struct {
	file string
	line int
	msg  string
}

func (e *ngxError) Error() string { return fmt.Sprintf("%s:%d: %s", e.file, e.line, e.msg) }
func (e *ngxError) Unwrap() error { return errNginxSyntax }

// parseNginx reads an nginx configuration file into its directives.
func parseNginx(file string, data []byte) ([]*ngxDirective, error) {
	if len(data) > maxFileBytes {
		return nil, fmt.Errorf("%s: %d bytes: larger than the %d a config file may be", file, len(data), maxFileBytes)
	}
	p := &ngxParser{file: file, src: data, line: 1}
	ds, end, err := p.block(0)
	if err != nil {
		return nil, err
	}
	if end == '}' {
		return nil, p.fail("unexpected \"}\"")
	}
	return ds, nil
}

// ngxParser reads the tokens of one file.
type ngxParser struct {
	file  string
	src   []byte
	pos   int
	line  int
	count int // directives read
}

func (p *ngxParser) fail(format string, args ...any) error {
	return &ngxError{p.file, p.line, fmt.Sprintf(format, args...)}
}

// block reads directives until the end of the file or a "}" (end says
// which: 0 or '}').
func (p *ngxParser) block(depth int) (ds []*ngxDirective, end byte, err error) {
	if depth > ngxMaxDepth {
		return nil, 0, p.fail("blocks nested deeper than %d", ngxMaxDepth)
	}
	for {
		words, line, stop, err := p.statement()
		if err != nil {
			return nil, 0, err
		}
		switch {
		case stop == 0 || stop == '}':
			if len(words) > 0 {
				return nil, 0, p.fail("unexpected end of file, expecting \";\" or \"}\" after %q", words[0])
			}
			if stop == 0 && depth > 0 {
				return nil, 0, p.fail("unexpected end of file, expecting \"}\"")
			}
			return ds, stop, nil
		case len(words) == 0:
			if stop == '{' {
				return nil, 0, p.fail("unexpected \"{\"")
			}
			continue // an empty statement
		}
		if p.count++; p.count > ngxMaxDirectives {
			return nil, 0, p.fail("more than %d directives: not a configuration file", ngxMaxDirectives)
		}
		d := &ngxDirective{Name: words[0], Args: words[1:], Line: line}
		if stop == '{' {
			d.block = true
			if d.Block, end, err = p.block(depth + 1); err != nil {
				return nil, 0, err
			}
			if end != '}' {
				return nil, 0, p.fail("unexpected end of file, expecting \"}\"")
			}
			if d.Block == nil {
				d.Block = []*ngxDirective{}
			}
		}
		ds = append(ds, d)
	}
}

// statement reads the words of one directive, up to the character that
// ends it (';', '{' or '}'; 0 at the end of the file), and the line of its
// first word.
func (p *ngxParser) statement() (words []string, line int, stop byte, err error) {
	for {
		c, ok := p.skip()
		if !ok {
			return words, line, 0, nil
		}
		switch c {
		case ';', '{', '}':
			p.pos++
			return words, line, c, nil
		}
		if len(words) == 0 {
			line = p.line
		}
		w, err := p.word()
		if err != nil {
			return nil, 0, 0, err
		}
		if len(words) > ngxMaxArgs {
			return nil, 0, 0, p.fail("more than %d arguments", ngxMaxArgs)
		}
		words = append(words, w)
	}
}

// skip passes white space and comments, and returns the next character.
func (p *ngxParser) skip() (byte, bool) {
	for p.pos < len(p.src) {
		switch c := p.src[p.pos]; c {
		case '\n':
			p.line++
			p.pos++
		case ' ', '\t', '\r':
			p.pos++
		case '#':
			for p.pos < len(p.src) && p.src[p.pos] != '\n' {
				p.pos++
			}
		default:
			return c, true
		}
	}
	return 0, false
}

// word reads one word: quoted, or up to white space or ; { }.
func (p *ngxParser) word() (string, error) {
	var b strings.Builder
	if q := p.src[p.pos]; q == '"' || q == '\'' {
		start := p.line
		p.pos++
		for p.pos < len(p.src) {
			c := p.src[p.pos]
			switch {
			case c == q:
				p.pos++
				if p.pos < len(p.src) && !strings.ContainsRune(" \t\r\n;{})", rune(p.src[p.pos])) {
					return "", p.fail("unexpected %q after a quoted string", p.src[p.pos])
				}
				return b.String(), nil
			case c == '\\' && p.pos+1 < len(p.src) && (p.src[p.pos+1] == q || p.src[p.pos+1] == '\\'):
				b.WriteByte(p.src[p.pos+1])
				p.pos += 2
				continue
			case c == '\n':
				p.line++
			}
			b.WriteByte(c)
			p.pos++
		}
		p.line = start
		return "", p.fail("unexpected end of file in a quoted string")
	}
	for p.pos < len(p.src) {
		c := p.src[p.pos]
		switch c {
		case ' ', '\t', '\r', '\n', ';', '{', '}':
			return b.String(), nil
		case '\\':
			if p.pos+1 < len(p.src) {
				p.pos++
				c = p.src[p.pos]
				if c == '\n' {
					p.line++
				}
			}
		}
		b.WriteByte(c)
		p.pos++
	}
	return b.String(), nil
}

// ngxFind returns the directives called name among ds.
func ngxFind(ds []*ngxDirective, name string) []*ngxDirective {
	var out []*ngxDirective
	for _, d := range ds {
		if d.Name == name {
			out = append(out, d)
		}
	}
	return out
}

// ngxLast returns the last directive called name among ds, or nil.
func ngxLast(ds []*ngxDirective, name string) *ngxDirective {
	for i := len(ds) - 1; i >= 0; i-- {
		if ds[i].Name == name {
			return ds[i]
		}
	}
	return nil
}
