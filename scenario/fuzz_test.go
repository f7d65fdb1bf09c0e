package scenario

import (
	"errors"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
)

// FuzzParse checks the loader's promises on any input: no panic; an error
// is an *Error and comes without a scenario; a scenario that loads passes
// Validate, builds every fleet's policy, and survives Marshal unchanged.
func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "*.yaml"))
	for _, file := range files {
		f.Add(readTestdata(f, filepath.Base(file)))
	}
	for _, tt := range parseErrorTests {
		if len(tt.in) < 4096 {
			f.Add([]byte(tt.in))
		}
	}
	// Inputs worth keeping from fuzzing runs.
	for _, seed := range []string{
		head + "fleets:\n  - &f {name: a, timeout: 1s, budget: {use: none}}\n  - *f\n",
		head + "fleets: &l [*l]\n",
		head + "fleets:\n  - &m {name: a, timeout: 1s, budget: {use: none}, retry: *m}\n",
		"&a [*a]\n",
		"duration: !!int 60s\n",
		"duration: !!str 60s\ntraffic: {rate: !!float 1}\n",
		"? !!merge <<\n: {}\n",
		"duration: 60s\ntraffic: {rate: 10, clients: !!int 1.5}\n",
		"{: }\n",
		"seed: 0b101\n" + head + fleet,
		"seed: 0o17\n" + head + fleet,
		withFleet("    retry: {backoff: {use: exponential, base: 1ns, cap: 24h, multiplier: 1000}}\n"),
		"duration: 1ns\ntick: 1ns\ntraffic: {rate: 1e-300}\norigin: {model: capacity, capacity: 5e-324}\n" + fleet,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := parse("fuzz.yaml", data, readTestFile)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("error %T %v is not an *Error", err, err)
			}
			if s != nil {
				t.Fatalf("a scenario with the error %v", err)
			}
			if e.Msg == "" || e.Line < 0 || e.Column < 0 {
				t.Fatalf("malformed error %#v", e)
			}
			return
		}
		checkValid(t, s)
	})
}

// checkValid asserts what holds for every scenario that Parse returns or
// that passes Validate: every fleet builds, and Parse(Marshal(s)) gives s
// back. It returns what Marshal wrote.
func checkValid(t testing.TB, s *Scenario) []byte {
	t.Helper()
	if err := s.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	for _, fl := range s.Fleets {
		if _, err := fl.NewPolicy(); err != nil {
			t.Fatalf("a valid fleet does not build: %v", err)
		}
	}
	out := Marshal(s)
	back, err := parse("marshalled.yaml", out, readTestFile)
	if err != nil {
		t.Fatalf("Marshal's output does not parse: %v\n%s", err, out)
	}
	if !reflect.DeepEqual(back, s) {
		t.Fatalf("round trip changed the scenario:\n%+v\nwant\n%+v\nfrom\n%s", back, s, out)
	}
	return out
}

// FuzzValidate changes up to three values of a valid scenario to anything
// and checks the promise Parse relies on: whatever passes Validate builds
// every fleet's policy (resil agrees with the ranges) and survives Marshal
// and Parse unchanged (the writer agrees with the reader).
func FuzzValidate(f *testing.F) {
	f.Add(uint8(0), uint16(0), 0.0, uint16(0), 0.0, uint16(0), 0.0)
	f.Add(uint8(1), uint16(40), 1e-6, uint16(41), 1e9, uint16(42), 5e-7)
	f.Add(uint8(1), uint16(57), 1000.0, uint16(58), 0.0005, uint16(7), 1e300)
	f.Add(uint8(2), uint16(3), -1.0, uint16(12), 9.3e18, uint16(20), 0.1)
	f.Fuzz(func(t *testing.T, base uint8, i1 uint16, v1 float64, i2 uint16, v2 float64, i3 uint16, v3 float64) {
		files := []string{"storm.yaml", "kinds.yaml", "concurrency.yaml", "lifo.yaml", "series.yaml", "tiers.yaml"}
		s, err := parse("base.yaml", readTestdata(t, files[int(base)%len(files)]), readTestFile)
		if err != nil {
			t.Fatal(err)
		}
		ls := leaves(reflect.ValueOf(s).Elem())
		for _, p := range []struct {
			i uint16
			v float64
		}{{i1, v1}, {i2, v2}, {i3, v3}} {
			poke(ls[int(p.i)%len(ls)], p.v)
		}
		if s.Validate() == nil {
			checkValid(t, s)
		}
	})
}

// leaves returns every settable scalar inside v.
func leaves(v reflect.Value) []reflect.Value {
	switch v.Kind() {
	case reflect.Struct:
		var ls []reflect.Value
		for i := range v.NumField() {
			ls = append(ls, leaves(v.Field(i))...)
		}
		return ls
	case reflect.Slice:
		var ls []reflect.Value
		for i := range v.Len() {
			ls = append(ls, leaves(v.Index(i))...)
		}
		return ls
	}
	return []reflect.Value{v}
}

// words is every word the file knows, for poking string fields.
var words = slices.Concat(models, triggerKinds, budgetKinds, breakerKinds, schedules, jitters, arrivals, disciplines, fundings, scopes)

// poke sets the scalar v from x.
func poke(v reflect.Value, x float64) {
	switch v.Kind() {
	case reflect.Float64:
		v.SetFloat(x)
	case reflect.Int, reflect.Int64:
		v.SetInt(int64(x))
	case reflect.Uint64:
		v.SetUint(uint64(x))
	case reflect.Bool:
		v.SetBool(x > 0)
	case reflect.String:
		v.SetString(words[uint64(x)%uint64(len(words))])
	}
}
