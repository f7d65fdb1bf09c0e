package full

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// calibrateData is a file of calibrate's testdata.
func calibrateData(name string) string {
	return filepath.Join("..", "..", "..", "..", "calibrate", "testdata", name)
}

// TestCalibrateOutput: calibrate -o writes through internal/outfile: never
// over an input (a saved answer, a config), never over a file calibrate
// did not write (the scenario, or the rate series beside it, checked
// both before either is written), never through a link; an earlier
// calibrated scenario is written over. -o - is standard output, and a
// rate that varied, whose series needs a file beside the scenario, is
// refused there.
func TestCalibrateOutput(t *testing.T) {
	dir := t.TempDir()
	at := func(name string) string { return filepath.Join(dir, name) }
	put := func(name, data string) string {
		if err := os.WriteFile(at(name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
		return at(name)
	}
	copyOf := func(src string) string {
		data, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		return put(filepath.Base(src), string(data))
	}
	varying, steady, route := copyOf(calibrateData("lab.json")), copyOf(calibrateData("envoy.json")), copyOf(importerData("envoy/route.yaml"))
	mine := put("mine.yaml", "name: mine\nduration: 60s\n")
	notes := put("notes.txt", "my notes\n")
	put("busy.rates.csv", "seconds,rate\n0,5\n") // the user's own series
	if err := os.Symlink(notes, at("link.yaml")); err != nil {
		t.Fatal(err)
	}
	kept := map[string]string{}
	for _, f := range []string{varying, steady, route, mine, notes, at("busy.rates.csv")} {
		data, _ := os.ReadFile(f)
		kept[f] = string(data)
	}

	for _, c := range []struct {
		args []string
		code int
		want string // on standard error
	}{
		{[]string{"--file", varying, "-o", varying}, 2, "is one of the command's inputs"},
		{[]string{"--file", steady, "--config", route, "-o", route}, 2, "is one of the command's inputs"},
		{[]string{"--file", steady, "-o", mine}, 2, "exists and is not a scenario calibrate wrote"},
		{[]string{"--file", varying, "-o", at("busy.yaml")}, 2, "its rate series " + at("busy.rates.csv") + " exists and is not a rate series calibrate wrote"},
		{[]string{"--file", varying, "-o", "-"}, 2, "-o -: the rate varied over the window (from 70 to 140 intents/s), and its series is written to a file beside the scenario, which standard output cannot hold: give -o FILE"},
		{[]string{"--file", steady, "-o", "-"}, 0, ""},
		{[]string{"--file", varying, "-o", at("lab.yaml")}, 0, "wrote " + at("lab.rates.csv")},
		{[]string{"--file", varying, "-o", at("lab.yaml")}, 0, "wrote " + at("lab.yaml")}, // over its own
		{[]string{"--file", steady, "-o", at("link.yaml")}, 0, "wrote " + at("link.yaml")},
	} {
		r := runCLI(t, append([]string{"calibrate"}, c.args...)...)
		if r.code != c.code || !strings.Contains(oneLine(r.stderr), c.want) {
			t.Errorf("calibrate %s: exit %d, stderr %q; want exit %d saying %q", strings.Join(c.args, " "), r.code, r.stderr, c.code, c.want)
		}
		if c.args[len(c.args)-1] == "-" && (r.code == 0) != strings.HasPrefix(r.stdout, "# Calibrated by retrystorm") {
			t.Errorf("calibrate %s: exit %d, standard output %.60q", strings.Join(c.args, " "), r.code, r.stdout)
		}
	}
	for f, data := range kept {
		if now, _ := os.ReadFile(f); string(now) != data {
			t.Errorf("%s was changed", f)
		}
	}
	if _, err := os.Stat(at("busy.yaml")); err == nil {
		t.Error("busy.yaml was written though its series could not be")
	}
	if fi, err := os.Lstat(at("link.yaml")); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("link.yaml is still a link (%v): written through it", err)
	}
	if _, err := os.Stat(at("-")); err == nil {
		t.Error(`-o - wrote a file named "-"`)
	}
}
