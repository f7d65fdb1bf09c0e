package scenario

import (
	"errors"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// readTestFile reads the files a test scenario names from testdata, by
// their base name, and nothing else on the disk: the fuzzers' scenarios
// name any path.
func readTestFile(path string) ([]byte, error) {
	name := filepath.Base(path)
	if !strings.HasSuffix(name, ".csv") {
		return nil, &fs.PathError{Op: "open", Path: path, Err: fs.ErrNotExist}
	}
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: path, Err: fs.ErrNotExist}
	}
	return data, nil
}

func TestReadSeries(t *testing.T) {
	s := time.Second
	for _, tt := range []struct {
		name, in, column string
		want             []Point
	}{
		{"Unix seconds, no header", "1700000000,10\n1700000015,20\n", "", []Point{{0, 10}, {15 * s, 20}}},
		{"fractional seconds", "1700000000.5,1\n1700000001.25,2.5\n", "", []Point{{0, 1}, {750 * time.Millisecond, 2.5}}},
		{"offsets as durations, header", "offset,rps\n0s,5\n1m30s,7\n", "", []Point{{0, 5}, {90 * s, 7}}},
		{"offsets as seconds", "0,5\n30,0\n60,5\n", "", []Point{{0, 5}, {30 * s, 0}, {60 * s, 5}}},
		{"RFC 3339", "t,r\n2024-05-01T10:00:00Z,3\n2024-05-01T12:00:00+02:00,4\n2024-05-01T10:00:01Z,5\n", "",
			nil}, // not increasing: the second row is the first's instant
		{"Grafana export, quoted, named column", "\"Time\",\"api\",\"db\"\n\"2024-05-01 10:00:00\",\"1\",\"2\"\n\"2024-05-01 10:00:10\",\"3\",\"4\"\n", "db",
			[]Point{{0, 2}, {10 * s, 4}}},
		{"byte order mark, comments, spaces, CRLF", "\ufeff# from the LB\r\ntime, rps\r\n0, 1\r\n# a gap in the log\r\n5, 2\r\n", "",
			[]Point{{0, 1}, {5 * s, 2}}},
		{"minutes, no seconds", "2024-05-01 10:00,1\n2024-05-01 10:01,2\n", "", []Point{{0, 1}, {time.Minute, 2}}},
		{"one row", "0,42\n", "", []Point{{0, 42}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ReadSeries("r.csv", []byte(tt.in), tt.column)
			if tt.want == nil {
				if err == nil {
					t.Fatalf("read %v, want an error", got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestReadSeriesErrors(t *testing.T) {
	for _, tt := range []struct {
		name, in, column string
		line             int
		msg              string
	}{
		{"empty", "", "", 0, "no rows"},
		{"only a header", "time,rate\n", "", 0, "no rows"},
		{"one column", "0\n1\n", "", 1, "needs two columns"},
		{"three columns, no column", "t,a,b\n0,1,2\n", "", 1, `say which holds the rate with column: ("a", "b")`},
		{"three columns, no header", "0,1,2\n", "", 1, "no header"},
		{"unknown column", "t,a\n0,1\n", "b", 1, `no column "b" after the time; the header names "t", "a"`},
		{"the time column named", "t,a\n0,1\n", "t", 1, `no column "t" after the time`},
		{"column without header", "0,1\n", "a", 1, "has no header row"},
		{"a row too short", "0,1\n5\n", "", 2, "another number of columns"},
		{"bad quoting", "0,1\n5,\"2\n", "", 2, "invalid CSV"},
		{"not a time after the header", "t,r\nnoon,1\n", "", 2, `"noon" is not a time`},
		{"not a time later", "0,1\nlater,1\n", "", 2, `"later" is not a time`},
		{"mixed kinds of time", "0,1\n15s,2\n", "", 2, "use one kind of time throughout"},
		{"milliseconds", "1700000000000,1\n1700000015000,1\n", "", 1, "looks like Unix milliseconds"},
		{"backwards", "0,1\n10,1\n5,1\n", "", 3, "not after the row above's"},
		{"repeated time", "0,1\n0,1\n", "", 2, "not after"},
		{"too long a span", "0,1\n3000000,1\n", "", 2, "a series spans at most"},
		{"negative rate", "0,1\n10,-3\n", "", 2, `the rate "-3" is negative`},
		{"NaN", "0,1\n10,NaN\n", "", 2, "not a finite number"},
		{"Inf", "0,1\n10,+Inf\n", "", 2, "not a finite number"},
		{"beyond float64", "0,1\n10,1e400\n", "", 2, "not a finite number"},
		{"too high", "0,1\n10,2e6\n", "", 2, "above 1000000 per second"},
		{"empty rate", "0,1\n10,\n", "", 2, "no rate in column 2"},
		{"not a number", "0,1\n10,lots\n", "", 2, `"lots" is not a number`},
		{"invalid UTF-8", "0,1\n10,\xff\n", "", 2, "invalid UTF-8"},
		{"too large", strings.Repeat("0", maxSeriesSize+1), "", 0, "too large"},
		{"too many rows", manyRows(maxSeriesRows + 1), "", maxSeriesRows + 1, "more than 200000 rows"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ReadSeries("r.csv", []byte(tt.in), tt.column)
			e, ok := errors.AsType[*Error](err)
			if !ok {
				t.Fatalf("error %v is not an *Error", err)
			}
			if e.File != "r.csv" || e.Line != tt.line || !strings.Contains(e.Msg, tt.msg) {
				t.Fatalf("got %q (line %d), want line %d and %q", err, e.Line, tt.line, tt.msg)
			}
		})
	}
}

// manyRows is a series of n rows, a second apart.
func manyRows(n int) string {
	var b strings.Builder
	for i := range n {
		b.WriteString(strconv.Itoa(i) + ",1\n")
	}
	return b.String()
}

// checkError checks that err is an *Error at at ("line:col" or "line"),
// about field, saying msg.
func checkError(t *testing.T, err error, at, field, msg string) {
	t.Helper()
	e, ok := errors.AsType[*Error](err)
	if !ok {
		t.Fatalf("error %v is not an *Error", err)
	}
	if got := position(e); got != at {
		t.Errorf("at %q, want %q: %v", got, at, e)
	}
	if e.Field != field {
		t.Errorf("Field = %q, want %q: %v", e.Field, field, e)
	}
	if !strings.Contains(e.Msg, msg) {
		t.Errorf("Msg = %q, want it to contain %q", e.Msg, msg)
	}
}

// TestSeriesAt: the rate is linear between rows, held after the last, and
// read at the start of each tick, times the scale.
func TestSeriesAt(t *testing.T) {
	s := &Series{Scale: 2, Points: []Point{{0, 10}, {10 * time.Second, 20}, {20 * time.Second, 0}}}
	for _, tt := range []struct {
		at   time.Duration
		want float64
	}{{0, 20}, {5 * time.Second, 30}, {10 * time.Second, 40}, {15 * time.Second, 20}, {20 * time.Second, 0}, {time.Hour, 0}} {
		if got := s.At(tt.at); math.Abs(got-tt.want) > 1e-9 {
			t.Errorf("At(%v) = %g, want %g", tt.at, got, tt.want)
		}
	}
	tr := Traffic{Rate: 40, Series: s}
	if got := tr.RateAt(5500*time.Millisecond, time.Second); got != 30 {
		t.Errorf("RateAt(5.5s) with 1s ticks = %g, want the rate at 5s, 30", got)
	}
	if s.Peak() != 40 {
		t.Errorf("Peak = %g, want 40", s.Peak())
	}
	if got := tr.RateChanges(5*time.Second, 30*time.Second); !slices.Equal(got, []time.Duration{5e9, 10e9, 15e9, 20e9}) {
		t.Errorf("RateChanges = %v", got)
	}
	if (&Traffic{Rate: 5}).RateChanges(time.Second, time.Minute) != nil {
		t.Error("a constant rate changes")
	}
}

// TestParseSeries: the series is read relative to the scenario's file,
// sets the rate to its peak, survives Marshal, and a load trigger still
// changes the rate.
func TestParseSeries(t *testing.T) {
	s, err := Load(filepath.Join("testdata", "series.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	sr := s.Traffic.Series
	if sr == nil || len(sr.Points) != 4 || sr.Points[1] != (Point{time.Minute, 120}) || sr.Scale != 1.5 {
		t.Fatalf("series %+v", sr)
	}
	if s.Traffic.Rate != 180 {
		t.Errorf("rate %g, want the peak 120 × 1.5", s.Traffic.Rate)
	}
	if got := s.Traffic.RateAt(30*time.Second, s.Tick); got != 150 {
		t.Errorf("rate at 30s %g, want 150", got)
	}
	out := Marshal(s)
	if strings.Contains(string(out), "traffic: {rate") {
		t.Errorf("Marshal wrote a rate beside the series:\n%s", out)
	}
	back, err := parse(filepath.Join("testdata", "again.yaml"), out, readSeriesFile)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if !reflect.DeepEqual(back, s) {
		t.Fatalf("round trip changed the scenario:\n%+v\nwant\n%+v", back, s)
	}
	if _, err := Parse("elsewhere/series.yaml", readTestdata(t, "series.yaml")); err == nil || !strings.Contains(err.Error(), `cannot read "elsewhere/rates.csv"`) {
		t.Errorf("the series was not looked for beside the scenario: %v", err)
	}
}

func TestParseSeriesErrors(t *testing.T) {
	const rest = "origin: {model: capacity, capacity: 10}\n" + fleet
	for _, tt := range []struct {
		name, in, at, field, msg string
	}{
		{"rate and series", "duration: 60s\ntraffic: {rate: 5, series: {file: rates.csv}}\n" + rest, "2:11", "traffic.rate", "rate and series exclude each other"},
		{"neither", "duration: 60s\ntraffic: {clients: 2}\n" + rest, "2:10", "traffic", "rate is required (it has no default; or give a series)"},
		{"no file", "duration: 60s\ntraffic: {series: {scale: 2}}\n" + rest, "2:19", "traffic.series", "file is required"},
		{"missing file", "duration: 60s\ntraffic: {series: {file: nope.csv}}\n" + rest, "2:26", "traffic.series.file", `cannot read "dir/nope.csv"`},
		{"bad scale", "duration: 3m\ntraffic: {series: {file: rates.csv, column: requests, scale: 0}}\n" + rest, "2:62", "traffic.series.scale", "must be in (0, 1000000]"},
		{"too high a scale", "duration: 3m\ntraffic: {series: {file: rates.csv, column: requests, scale: 1e5}}\n" + rest, "2:62", "traffic.series.scale", "peak at 12000000"},
		{"short series", "duration: 5m\ntraffic: {series: {file: rates.csv, column: requests}}\n" + rest, "2:26", "traffic.series.file", "the series covers 3m, but the run's last tick starts at 299s"},
		{"bad column", "duration: 3m\ntraffic: {series: {file: rates.csv, column: rps}}\n" + rest, "2", "traffic.series.file", `no column "rps" after the time; the header names "time", "requests"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parse("dir/x.yaml", []byte(tt.in), readTestFileIn("dir"))
			checkError(t, err, tt.at, tt.field, tt.msg)
		})
	}
	// The CSV's own line, in the CSV's file.
	_, err := parse("dir/x.yaml", []byte("duration: 3m\ntraffic: {series: {file: rates.csv, column: rps}}\n"+rest), readTestFileIn("dir"))
	if e, ok := errors.AsType[*Error](err); !ok || e.File != "dir/rates.csv" {
		t.Errorf("error %v does not name the CSV file", err)
	}
	if _, err := parse("x.yaml", []byte("duration: 3m\ntraffic: {series: {file: rates.csv}}\n"+rest), nil); err == nil || !strings.Contains(err.Error(), "cannot be read here") {
		t.Errorf("a series read without a reader: %v", err)
	}
}

// readTestFileIn reads testdata's CSV files as if they were in dir.
func readTestFileIn(dir string) func(string) ([]byte, error) {
	return func(path string) ([]byte, error) {
		if filepath.Dir(path) != dir {
			return nil, &fs.PathError{Op: "open", Path: path, Err: fs.ErrNotExist}
		}
		return readTestFile(path)
	}
}

// FuzzReadSeries: any input is read without panic, refused with an *Error
// on a line of the input, or read as a series Validate takes: rows from
// time 0, forward in time, with finite rates in range.
func FuzzReadSeries(f *testing.F) {
	for _, seed := range []string{
		"time,rate\n0,1\n15,2\n", "1700000000,10\n1700000015,20\n", "0s,1\n1m,2\n",
		"\"Time\",\"a\",\"b\"\n\"2024-05-01 10:00:00\",\"1\",\"2\"\n", "\ufeff# c\r\n0,1\r\n", "0,1\n5,\"2\n",
		"2024-05-01T10:00:00Z,1\n2024-05-01T10:00:00.5Z,1e3\n", "0,0x10\n1,1_0\n", "0,1\n1,-0\n",
	} {
		f.Add([]byte(seed), "")
	}
	f.Add([]byte("t,a,b\n0,1,2\n"), "b")
	f.Fuzz(func(t *testing.T, data []byte, column string) {
		pts, err := ReadSeries("f.csv", data, column)
		if err != nil {
			e, ok := errors.AsType[*Error](err)
			if !ok || e.File != "f.csv" || e.Msg == "" || e.Line < 0 || e.Line > strings.Count(string(data), "\n")+1 {
				t.Fatalf("error %#v", err)
			}
			if pts != nil {
				t.Fatal("points with an error")
			}
			return
		}
		s := Series{File: "f.csv", Scale: 1, Points: pts}
		c := new(checker)
		s.check(c, "traffic.series")
		if !c.ok() && (s.Peak() > 0 || !strings.Contains(c.err.Msg, "every rate")) {
			t.Fatalf("ReadSeries read a series Validate refuses: %v", c.err)
		}
	})
}
