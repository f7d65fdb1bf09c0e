package scenario

import (
	"encoding"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/retrystorm/retrystorm/resil/budget"
	"go.yaml.in/yaml/v3"
)

// The scalar values of a scenario file. Each checks the YAML type before
// anything else: "30" (a string) is not a number, 30 is not a duration, and
// yes is not a boolean.

const (
	tagStr   = "!!str"
	tagInt   = "!!int"
	tagFloat = "!!float"
	tagBool  = "!!bool"
	tagNull  = "!!null"
)

// number is a finite float.
type number struct{ p *float64 }

func (v number) read(d *decoder, n *yaml.Node, path string) error {
	if f, ok := beyondFloat(n); ok {
		// Beyond float64: read as the largest finite number, for the
		// range check to refuse with the file's text.
		d.shown[path] = resolve(n).Value
		*v.p = f
		return nil
	}
	if _, _, ok := d.bigInteger(n); ok {
		// A whole number beyond int64, typed float by the YAML library,
		// or string: it is a number all the same.
		f, _ := strconv.ParseFloat(strings.ReplaceAll(resolve(n).Value, "_", ""), 64)
		if !math.IsInf(f, 0) && !math.IsNaN(f) {
			*v.p = f
			return nil
		}
	}
	n, err := d.scalar(n, path, "a number", tagInt, tagFloat)
	if err != nil {
		return err
	}
	var f float64
	if n.Decode(&f) != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return d.errorOn(n, path, "must be a finite number, got %s", n.Value)
	}
	*v.p = f
	return nil
}

func (v number) write() *yaml.Node { return plain(formatFloat(*v.p)) }
func (v number) zero() bool        { return *v.p == 0 }
func (v number) bound() any        { return v.p }

// beyondFloat reports whether n is an unquoted decimal number beyond float64's
// range (1e400), and returns the largest float64 of its sign.
func beyondFloat(n *yaml.Node) (float64, bool) {
	n = resolve(n)
	if n.Kind != yaml.ScalarNode || n.Style != 0 {
		return 0, false
	}
	f, err := strconv.ParseFloat(n.Value, 64)
	if ne, ok := err.(*strconv.NumError); !ok || ne.Err != strconv.ErrRange || !math.IsInf(f, 0) {
		return 0, false
	}
	return math.Copysign(math.MaxFloat64, f), true
}

// integer is a whole number.
type integer struct{ p *int }

func (v integer) read(d *decoder, n *yaml.Node, path string) error {
	i, err := d.integer(n, path)
	if err != nil {
		return err
	}
	*v.p = i
	return nil
}

func (v integer) write() *yaml.Node { return plain(strconv.Itoa(*v.p)) }
func (v integer) zero() bool        { return *v.p == 0 }
func (v integer) bound() any        { return v.p }

// increment is an AWS quota's no_retry_increment: a whole number, 0
// meaning that a first attempt's success adds nothing (resil's
// NoIncrement, as aws-sdk-go-v2's adaptive mode ships), where resil's
// NoRetryIncrement of 0 would be its default.
type increment struct{ s *budget.AWSQuotaSettings }

func (v increment) read(d *decoder, n *yaml.Node, path string) error {
	i, err := d.integer(n, path)
	if err != nil {
		return err
	}
	v.s.NoRetryIncrement, v.s.NoIncrement = i, i == 0
	return nil
}

func (v increment) write() *yaml.Node {
	if v.s.NoIncrement {
		return plain("0")
	}
	return plain(strconv.Itoa(v.s.NoRetryIncrement))
}

func (v increment) zero() bool { return !v.s.NoIncrement && v.s.NoRetryIncrement == 0 }
func (v increment) bound() any { return &v.s.NoRetryIncrement }

// retries is max_retries: a whole number, or the word unlimited.
type retries struct{ p *int }

func (v retries) read(d *decoder, n *yaml.Node, path string) error {
	if r := resolve(n); r.Kind == yaml.ScalarNode && r.ShortTag() == tagStr {
		if r.Value != "unlimited" {
			return d.errorOn(r, path, "must be a whole number or unlimited, got %s", describe(r))
		}
		*v.p = -1
		return nil
	}
	i, err := d.integer(n, path)
	if err != nil {
		return err
	}
	if i < 0 {
		return d.errorOn(resolve(n), path, "must not be negative; write unlimited for no limit")
	}
	*v.p = i
	return nil
}

func (v retries) write() *yaml.Node {
	if *v.p == -1 {
		return plain("unlimited")
	}
	return plain(strconv.Itoa(*v.p))
}

func (v retries) zero() bool { return *v.p == 0 }

// unsigned is the seed.
type unsigned struct{ p *uint64 }

func (v unsigned) read(d *decoder, n *yaml.Node, path string) error {
	if negative, fits, ok := d.bigInteger(n); ok && !fits {
		if negative {
			return d.errorOn(resolve(n), path, "must not be negative, got %s", resolve(n).Value)
		}
		return d.errorOn(resolve(n), path, "must be at most %d, got %s", uint64(math.MaxUint64), resolve(n).Value)
	}
	n, err := d.scalar(n, path, "a whole number", tagInt)
	if err != nil {
		return err
	}
	if n.Decode(v.p) != nil {
		if strings.HasPrefix(n.Value, "-") {
			return d.errorOn(n, path, "must not be negative, got %s", n.Value)
		}
		return d.errorOn(n, path, "must be at most %d, got %s", uint64(math.MaxUint64), n.Value)
	}
	return nil
}

func (v unsigned) write() *yaml.Node { return plain(strconv.FormatUint(*v.p, 10)) }
func (v unsigned) zero() bool        { return *v.p == 0 }

// duration is a Go duration string. The number 0 is taken as well, as
// time.ParseDuration takes "0": zero needs no unit.
type duration struct{ p *time.Duration }

const durationHint = `a duration with a unit, such as "30s", "100ms" or "1m30s"`

func (v duration) read(d *decoder, n *yaml.Node, path string) error {
	n = resolve(n)
	if n.Kind == yaml.ScalarNode && n.ShortTag() == tagInt && n.Value == "0" {
		*v.p = 0
		return nil
	}
	n, err := d.scalar(n, path, durationHint, tagStr)
	if err != nil {
		return err
	}
	t, err := time.ParseDuration(n.Value)
	if err != nil {
		return d.errorOn(n, path, "%q is not a duration: write %s", n.Value, durationHint)
	}
	*v.p = t
	return nil
}

func (v duration) write() *yaml.Node { return str(formatDuration(*v.p)) }
func (v duration) zero() bool        { return *v.p == 0 }
func (v duration) bound() any        { return v.p }

// boolean is true or false.
type boolean struct{ p *bool }

func (v boolean) read(d *decoder, n *yaml.Node, path string) error {
	n, err := d.scalar(n, path, "true or false", tagBool)
	if err != nil {
		return err
	}
	if n.Decode(v.p) != nil { // an explicit !!bool tag on something else
		return d.errorOn(n, path, "must be true or false, got %q", n.Value)
	}
	return nil
}

func (v boolean) write() *yaml.Node { return plain(strconv.FormatBool(*v.p)) }
func (v boolean) zero() bool        { return !*v.p }
func (v boolean) bound() any        { return v.p }

// word is one of a fixed set of names. unset, if not empty, is the word an
// empty value reads as in a scenario built in code (Marshal writes it);
// otherwise a word is required.
type word struct {
	p     *string
	words []string
	unset string
}

func (v word) read(d *decoder, n *yaml.Node, path string) error {
	n, err := d.scalar(n, path, oneOf(v.words), tagStr)
	if err != nil {
		return err
	}
	if !slices.Contains(v.words, n.Value) {
		return d.errorOn(n, path, "unknown value %q%s", n.Value, didYouMean(n.Value, v.words))
	}
	*v.p = n.Value
	return nil
}

func (v word) write() *yaml.Node {
	if *v.p == "" && v.unset != "" {
		return plain(v.unset)
	}
	return plain(*v.p)
}
func (v word) zero() bool { return *v.p == "" }

// enumWord is one of resil's enum values, kept as its own type (p points
// to it) and spelled as its text form, one of words. Its zero value reads
// as none of them.
type enumWord struct {
	p interface {
		encoding.TextMarshaler
		encoding.TextUnmarshaler
	}
	words []string
}

func (v enumWord) read(d *decoder, n *yaml.Node, path string) error {
	var w string
	if err := (word{p: &w, words: v.words}).read(d, n, path); err != nil {
		return err
	}
	return v.p.UnmarshalText([]byte(w))
}

func (v enumWord) write() *yaml.Node { return plain(v.word()) }
func (v enumWord) zero() bool        { return !slices.Contains(v.words, v.word()) }
func (v enumWord) bound() any        { return v.p }

// word is the value's text form, or "" for a value that has none.
func (v enumWord) word() string {
	b, _ := v.p.MarshalText()
	return string(b)
}

// wordList is a list of names from a fixed set, each at most once: an empty
// list is not written.
type wordList struct {
	p     *[]string
	words []string
}

func (v wordList) read(d *decoder, n *yaml.Node, path string) error {
	n = resolve(n)
	if n.Kind != yaml.SequenceNode {
		return d.typeError(n, path, "a list of "+oneOf(v.words))
	}
	var got []string
	for i, c := range n.Content {
		p := fmt.Sprintf("%s[%d]", path, i)
		c, err := d.scalar(c, p, oneOf(v.words), tagStr)
		if err != nil {
			return err
		}
		if !slices.Contains(v.words, c.Value) {
			return d.errorOn(c, p, "unknown value %q%s", c.Value, didYouMean(c.Value, v.words))
		}
		if slices.Contains(got, c.Value) {
			return d.errorOn(c, p, "%q is listed twice", c.Value)
		}
		got = append(got, c.Value)
	}
	if len(got) == 0 {
		return d.errorOn(n, path, "must list at least one of %s (leave it out for all of them)", oneOf(v.words))
	}
	*v.p = got
	return nil
}

func (v wordList) write() *yaml.Node {
	if len(*v.p) == 0 {
		return nil
	}
	n := &yaml.Node{Kind: yaml.SequenceNode, Style: yaml.FlowStyle}
	for _, w := range *v.p {
		n.Content = append(n.Content, plain(w))
	}
	return n
}

func (v wordList) zero() bool { return len(*v.p) == 0 }

// text is a free string: a name.
type text struct{ p *string }

func (v text) read(d *decoder, n *yaml.Node, path string) error {
	n, err := d.scalar(n, path, "a string", tagStr)
	if err != nil {
		return err
	}
	*v.p = n.Value
	return nil
}

// write leaves the quoting to the encoder, which quotes a name that would
// otherwise read back as another type ("1", "true").
func (v text) write() *yaml.Node { return str(strings.ToValidUTF8(*v.p, "\uFFFD")) }
func (v text) zero() bool        { return *v.p == "" }

// plain is a scalar written as is: a number, a word, a boolean.
func plain(s string) *yaml.Node { return &yaml.Node{Kind: yaml.ScalarNode, Value: s} }

// str is a string scalar, quoted when it would read back as another type.
func str(s string) *yaml.Node { return &yaml.Node{Kind: yaml.ScalarNode, Tag: tagStr, Value: s} }

// formatFloat writes the shortest form that reads back as the same float.
func formatFloat(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

// formatDuration writes d in the unit a person would: "5m", "90s",
// "100ms". Unlike time.Duration.String ("1m30s") it uses a single unit, the
// largest that divides d exactly among h, m, s, ms, us and ns; the result
// always reads back as d.
func formatDuration(d time.Duration) string {
	if d == 0 {
		return "0s"
	}
	for _, u := range []struct {
		unit time.Duration
		name string
	}{{time.Hour, "h"}, {time.Minute, "m"}, {time.Second, "s"}, {time.Millisecond, "ms"}, {time.Microsecond, "us"}} {
		if d%u.unit == 0 {
			return strconv.FormatInt(int64(d/u.unit), 10) + u.name
		}
	}
	return strconv.FormatInt(int64(d), 10) + "ns"
}

// describe names what a node holds, for a message about a wrong type.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a map"
	case yaml.SequenceNode:
		return "a list"
	}
	v := n.Value
	if len(v) > 40 {
		v = v[:40] + "..."
	}
	switch n.ShortTag() {
	case tagNull:
		return "nothing"
	case tagStr:
		return fmt.Sprintf("the string %q", v)
	case tagInt, tagFloat:
		return "the number " + v
	case tagBool:
		return v
	case "!!timestamp":
		return "the date " + v
	}
	return fmt.Sprintf("%q (%s)", v, n.ShortTag())
}

// rate is the traffic's rate: a number, left out when a series gives it.
type rate struct{ t *Traffic }

func (v rate) read(d *decoder, n *yaml.Node, path string) error {
	return number{&v.t.Rate}.read(d, n, path)
}

func (v rate) write() *yaml.Node {
	if v.t.Series != nil {
		return nil
	}
	return number{&v.t.Rate}.write()
}

func (v rate) zero() bool { return v.t.Rate == 0 || v.t.Series != nil }

// series is the traffic's rate series: a map naming a CSV file, which is
// read (relative to the scenario file) as the map is.
type series struct{ p **Series }

func (v series) read(d *decoder, n *yaml.Node, path string) error {
	s := new(Series)
	if err := seriesObject(s).read(d, n, path); err != nil {
		return err
	}
	file := seriesPath(d.file, s.File)
	at := join(path, "file")
	if s.File == "" {
		return d.errorAt(at, "must name a CSV file")
	}
	if d.read == nil {
		return d.errorAt(at, "a rate series cannot be read here: load the scenario from a file")
	}
	data, err := d.read(file)
	if err != nil {
		// boundedfile's errors say "cannot read the file: why" for the
		// system's; say it once.
		msg := strings.TrimPrefix(err.Error(), "cannot read the file: ")
		return d.errorAt(at, "cannot read %q: %s", file, msg)
	}
	pts, err := ReadSeries(file, data, s.Column)
	if err != nil {
		if e, ok := errors.AsType[*Error](err); ok {
			// The CSV's own place, and the field that named it.
			e.Field = at
			return e
		}
		return d.errorAt(at, "%v", err)
	}
	s.Points = pts
	*v.p = s
	return nil
}

func (v series) write() *yaml.Node {
	if *v.p == nil {
		return nil
	}
	return seriesObject(*v.p).write()
}

func (v series) zero() bool { return *v.p == nil }

func (v series) validate(c *checker, path string) {
	if *v.p != nil {
		seriesObject(*v.p).validate(c, path)
	}
}
