package scenario

import (
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/retrystorm/retrystorm/internal/boundedfile"
)

// Series is a rate series: the traffic's intent rate over time, read from
// a CSV file of two columns, a time and a rate per second, one row per
// sample (a Prometheus export, a load balancer's log summarised per
// minute). The run's time 0 is the first row's time; the rate of each tick
// is the series interpolated linearly at the tick's start, times Scale.
type Series struct {
	// File is the CSV file, relative to the scenario file's directory
	// (or absolute). Required in a file; a series built in code may leave
	// it empty and set Points.
	File string
	// Column names the rate's column by its header; empty means the
	// second column of a two-column file.
	Column string
	// Scale multiplies every rate; more than 0, default 1.
	Scale float64
	// Points are the file's rows: each row's time from the first row's,
	// and its rate as written (before Scale). Parse fills them.
	Points []Point
}

// Point is one row of a rate series.
type Point struct {
	At   time.Duration // from the first row
	Rate float64       // per second, as the file writes it
}

// Bounds of a rate series file: a month of samples every fifteen seconds
// fits in both.
const (
	maxSeriesSize = 8 << 20
	maxSeriesRows = 200_000
)

// Peak is the highest rate of the series, scaled.
func (s *Series) Peak() float64 {
	p := 0.0
	for _, x := range s.Points {
		p = max(p, x.Rate)
	}
	return p * s.Scale
}

// At is the series' rate at t, scaled: linear between the rows around t,
// the last row's after it.
func (s *Series) At(t time.Duration) float64 {
	ps := s.Points
	if len(ps) == 0 {
		return 0
	}
	i, _ := slices.BinarySearchFunc(ps, t, func(p Point, t time.Duration) int {
		switch {
		case p.At < t:
			return -1
		case p.At > t:
			return 1
		}
		return 0
	})
	switch {
	case i >= len(ps):
		return ps[len(ps)-1].Rate * s.Scale
	case ps[i].At == t || i == 0:
		return ps[i].Rate * s.Scale
	}
	a, b := ps[i-1], ps[i]
	f := float64(t-a.At) / float64(b.At-a.At)
	return (a.Rate + f*(b.Rate-a.Rate)) * s.Scale
}

// RateAt is the intent rate at t before any load trigger: the series' at
// the start of t's tick when there is a series, or the ramp's when there
// is a ramp (arrivals.go), Rate otherwise.
func (t *Traffic) RateAt(at, tick time.Duration) float64 {
	if t.Series == nil {
		if t.Ramp.For > 0 {
			return t.rampAt(at, tick)
		}
		return t.Rate
	}
	if tick > 0 {
		at -= at % tick
	}
	return t.Series.At(at)
}

// RateChanges returns the starts of the ticks, within a run of d, at which
// the series (or the ramp) changes the rate, in order: none without one.
func (t *Traffic) RateChanges(tick, d time.Duration) []time.Duration {
	if (t.Series == nil && t.Ramp.For <= 0) || tick <= 0 {
		return nil
	}
	var out []time.Duration
	prev := t.RateAt(0, tick)
	for at := tick; at < d; at += tick {
		if r := t.RateAt(at, tick); r != prev {
			out = append(out, at)
			prev = r
		}
	}
	return out
}

// ReadSeries reads the rows of a rate series from CSV (see Series and
// docs/scenario.md): an optional header row, then one row per sample, a
// time in the first column and a rate in the second or in the column
// named column. A time is a number of seconds (an offset, or a Unix time
// as Prometheus writes it), a duration ("90s") or a date and time (RFC
// 3339, or "2006-01-02 15:04:05" as Grafana exports it; UTC when no zone
// is given), the same kind on every row and increasing. A rate is a finite
// number, at least 0. Lines starting with # are comments. file names the
// file in errors, which are *Error with its line.
func ReadSeries(file string, data []byte, column string) ([]Point, error) {
	sr := &seriesReader{file: file, column: column, col: 1}
	if err := sr.checkBytes(data); err != nil {
		return nil, err
	}
	data = bytes.TrimPrefix(data, []byte("\ufeff")) // a spreadsheet's byte order mark
	r := csv.NewReader(bytes.NewReader(data))
	r.Comment = '#'
	r.TrimLeadingSpace = true
	r.ReuseRecord = true
	for n := 0; ; n++ {
		rec, err := r.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, sr.csvError(err)
		}
		line, _ := r.FieldPos(0)
		if n == 0 {
			header, err := sr.firstRow(line, rec)
			if err != nil {
				return nil, err
			}
			if header {
				continue // a header holds no sample
			}
		}
		if len(sr.pts) >= maxSeriesRows {
			return nil, sr.fail(line, "more than %d rows: shorten the series, or sample it less often", maxSeriesRows)
		}
		at, err := sr.rowTime(line, n, rec[0])
		if err != nil {
			return nil, err
		}
		v, err := sr.rowRate(line, rec[sr.col])
		if err != nil {
			return nil, err
		}
		sr.pts = append(sr.pts, Point{At: at, Rate: v})
	}
	if len(sr.pts) == 0 {
		return nil, sr.fail(0, "no rows: a rate series needs at least one row of a time and a rate")
	}
	return sr.pts, nil
}

// seriesReader is ReadSeries' state: the file's name for errors, the
// rate's column, the kind and value of the first row's time (every row's
// is of its kind, and taken from it), and the rows read.
type seriesReader struct {
	file   string
	column string // the rate's column's name; empty: the second column
	col    int    // the rate's column's index
	kind   timeKind
	first  float64 // the first row's time, in its kind's seconds
	header bool
	pts    []Point
}

// fail is an *Error at line of the file.
func (sr *seriesReader) fail(line int, format string, args ...any) error {
	return &Error{File: sr.file, Line: line, Msg: fmt.Sprintf(format, args...)}
}

// checkBytes refuses a file too large, or not UTF-8 (naming the line of
// the first invalid byte), before any of it is parsed.
func (sr *seriesReader) checkBytes(data []byte) error {
	if len(data) > maxSeriesSize {
		return sr.fail(0, "the file is too large (%d bytes; at most %d)", len(data), maxSeriesSize)
	}
	if !utf8.Valid(data) {
		off := 0
		for off < len(data) {
			r, n := utf8.DecodeRune(data[off:])
			if r == utf8.RuneError && n <= 1 {
				break
			}
			off += n
		}
		line, _ := lineCol(data, off)
		return sr.fail(line, "invalid UTF-8 (byte 0x%02x): save the file as UTF-8", data[off])
	}
	return nil
}

// csvError is the *Error for the CSV reader's err, at its line and
// column when it has them.
func (sr *seriesReader) csvError(err error) error {
	if pe, ok := errors.AsType[*csv.ParseError](err); ok {
		msg := pe.Err.Error()
		if errors.Is(pe.Err, csv.ErrFieldCount) {
			msg = "a row with another number of columns than the first row"
		}
		return &Error{File: sr.file, Line: pe.Line, Column: pe.Column, Msg: "invalid CSV: " + msg, Err: err}
	}
	return sr.fail(0, "invalid CSV: %v", err)
}

// firstRow reads the first row's shape: a header (true: it holds no
// sample) whose names find the rate's column, or a first sample, in a file
// of two columns, which no column: may name.
func (sr *seriesReader) firstRow(line int, rec []string) (bool, error) {
	column := sr.column
	if len(rec) < 2 {
		return false, sr.fail(line, "a rate series needs two columns, a time and a rate; this row has %d", len(rec))
	}
	if _, ok := parseSeriesTime(rec[0]); !ok {
		sr.header = true
		if column == "" && len(rec) > 2 {
			return false, sr.fail(line, "the file has %d columns: say which holds the rate with column: (%s)", len(rec), quoteAll(rec[1:]))
		}
		if column != "" {
			sr.col = slices.IndexFunc(rec, func(h string) bool { return strings.TrimSpace(h) == column })
			if sr.col < 1 {
				return false, sr.fail(line, "no column %q after the time; the header names %s", column, quoteAll(rec))
			}
		}
		return true, nil
	}
	if column != "" {
		return false, sr.fail(line, "column: %q names a column, but the file has no header row (its first row holds a time, %q)", column, rec[0])
	}
	if len(rec) > 2 {
		return false, sr.fail(line, "the file has %d columns and no header: give it a header row and say which column holds the rate with column:", len(rec))
	}
	return false, nil
}

// rowTime is the time of row n (its first field, field), from the first
// sample's: of the first sample's kind, within maxRun of it, and after
// the row above's.
func (sr *seriesReader) rowTime(line, n int, field string) (time.Duration, error) {
	t, ok := parseSeriesTime(field)
	switch {
	case !ok && n == 1 && sr.header:
		return 0, sr.fail(line, "%q is not a time: write seconds (1700000000 or 15.5), a duration (90s) or a date and time (2024-05-01T10:00:00Z)", field)
	case !ok:
		return 0, sr.fail(line, "%q is not a time: write seconds, a duration or a date and time, as the rows above", field)
	case len(sr.pts) == 0:
		sr.kind, sr.first = t.kind, t.secs
		if sr.kind == timeSeconds && t.secs >= 1e11 {
			return 0, sr.fail(line, "the time %s looks like Unix milliseconds: write seconds (divide by 1000)", field)
		}
	case t.kind != sr.kind:
		return 0, sr.fail(line, "the time %q is %s, but the first row's is %s: use one kind of time throughout", field, t.kind, sr.kind)
	}
	off := t.secs - sr.first
	if !(off < maxRun.Seconds()) {
		return 0, sr.fail(line, "the time %q is more than %s after the first row's: a series spans at most that", field, show(maxRun))
	}
	at := time.Duration(math.Round(off * 1e9))
	if len(sr.pts) > 0 && at <= sr.pts[len(sr.pts)-1].At {
		return 0, sr.fail(line, "the time %q is not after the row above's: the rows must go forward in time", field)
	}
	return at, nil
}

// rowRate is a row's rate, its field in the rate's column: a finite
// number from 0 to maxRate.
func (sr *seriesReader) rowRate(line int, field string) (float64, error) {
	field = strings.TrimSpace(field)
	v, err := strconv.ParseFloat(field, 64)
	switch {
	case field == "":
		return 0, sr.fail(line, "no rate in column %d: fill the gap, or remove the row", sr.col+1)
	case err != nil && !errors.Is(err, strconv.ErrRange):
		return 0, sr.fail(line, "the rate %q is not a number", field)
	case math.IsNaN(v) || math.IsInf(v, 0):
		return 0, sr.fail(line, "the rate %q is not a finite number", field)
	case v < 0:
		return 0, sr.fail(line, "the rate %q is negative: a rate is at least 0", field)
	case v > maxRate:
		return 0, sr.fail(line, "the rate %q is above %s per second", field, show(float64(maxRate)))
	}
	return v, nil
}

func quoteAll(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = strconv.Quote(strings.TrimSpace(s))
	}
	return strings.Join(q, ", ")
}

// timeKind is how a series writes its times.
type timeKind uint8

const (
	timeSeconds  timeKind = iota // a number of seconds
	timeDuration                 // a Go duration
	timeDate                     // a date and time
)

func (k timeKind) String() string {
	return [...]string{"a number of seconds", "a duration", "a date and time"}[k]
}

type seriesTime struct {
	kind timeKind
	secs float64
}

// dateLayouts are the dates and times a series may hold: RFC 3339 and the
// space-separated form spreadsheets and Grafana write, with a zone or
// without (UTC).
var dateLayouts = []string{
	time.RFC3339Nano,
	"2006-01-02 15:04:05.999999999Z07:00",
	"2006-01-02 15:04:05.999999999 -0700",
	"2006-01-02T15:04:05.999999999",
	"2006-01-02 15:04:05.999999999",
	"2006-01-02 15:04",
}

func parseSeriesTime(s string) (seriesTime, bool) {
	s = strings.TrimSpace(s)
	if f, err := strconv.ParseFloat(s, 64); err == nil && !math.IsInf(f, 0) && !math.IsNaN(f) {
		return seriesTime{timeSeconds, f}, true
	}
	if d, err := time.ParseDuration(s); err == nil {
		return seriesTime{timeDuration, d.Seconds()}, true
	}
	for _, l := range dateLayouts {
		if t, err := time.Parse(l, s); err == nil {
			return seriesTime{timeDate, float64(t.Unix()) + float64(t.Nanosecond())/1e9}, true
		}
	}
	return seriesTime{}, false
}

// readSeriesFile reads the CSV at path: a regular file of at most
// maxSeriesSize bytes (internal/boundedfile).
func readSeriesFile(path string) ([]byte, error) {
	return boundedfile.Read(path, maxSeriesSize)
}

// seriesPath is where a series file named in the scenario file scenarioFile
// is: relative to the scenario's directory, unless absolute.
func seriesPath(scenarioFile, file string) string {
	if filepath.IsAbs(file) {
		return file
	}
	return filepath.Join(filepath.Dir(scenarioFile), file)
}

// check validates a series as the traffic holds it.
func (s *Series) check(c *checker, path string) {
	at := func(key string) string { return join(path, key) }
	over(c, at("scale"), s.Scale, 0, maxRate)
	switch {
	case len(s.Points) == 0:
		c.fail(at("file"), "the series has no rows")
		return
	case len(s.Points) > maxSeriesRows:
		c.fail(at("file"), "the series has %d rows; at most %d", len(s.Points), maxSeriesRows)
		return
	case s.Points[0].At != 0:
		c.fail(at("file"), "the series' first row must be at time 0, got %s", show(s.Points[0].At))
		return
	}
	for i, p := range s.Points {
		switch {
		case !(p.Rate >= 0 && p.Rate <= maxRate):
			c.fail(at("file"), "row %d: the rate must be in [0, %s], got %s", i+1, show(float64(maxRate)), show(p.Rate))
			return
		case i > 0 && p.At <= s.Points[i-1].At:
			c.fail(at("file"), "row %d: the time %s is not after the row above's", i+1, show(p.At))
			return
		case p.At > maxRun:
			c.fail(at("file"), "row %d: the time %s is beyond %s", i+1, show(p.At), show(maxRun))
			return
		}
	}
	if c.ok() {
		if p := s.Peak(); !(p > 0) {
			c.fail(at("file"), "every rate of the series is 0: no intent would arrive")
		} else if p > maxRate {
			c.fail(at("scale"), "%s makes the series peak at %s intents per second; at most %s", show(s.Scale), show(p), show(float64(maxRate)))
		}
	}
}
