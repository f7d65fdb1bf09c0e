package configcmd

import (
	"bytes"
	"context"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/retrystorm/retrystorm/experiment"
	"github.com/retrystorm/retrystorm/importer"
	"github.com/retrystorm/retrystorm/internal/race"
	"github.com/retrystorm/retrystorm/userconfig"
	"github.com/retrystorm/retrystorm/verdict"
)

func advisedata(name string) string { return filepath.Join("testdata", "advise", name) }

// TestAdviseEditsEachFormat is issue 35's "done when": on an Envoy route
// and cluster, Istio (a VirtualService with its DestinationRule, and a
// kubectl List), Linkerd, gRPC in both key spellings and AWS files that
// check calls UNSAFE or AT RISK, advise --write writes an edit that the
// product's parser accepts (importer.ValidateEdited), that imports back
// as the recommendation it printed, and with which check finds fewer
// collapsed cells (for an AT RISK config: fewer findings past the
// thresholds), over the same cells and seeds.
func TestAdviseEditsEachFormat(t *testing.T) {
	cases := []adviseEditCase{
		{"envoy route and cluster", []string{advisedata("envoy-route.yaml"), advisedata("envoy-cluster.yaml")}, importer.Envoy, "", nil},
		{"istio virtualservice and destinationrule", []string{testdata("istio/reviews.yaml"), testdata("istio/destination-rule-reviews.yaml")}, importer.Istio, "ratings", nil},
		{"istio kubectl list", []string{advisedata("istio-list.yaml")}, importer.Istio, "", nil},
		{"linkerd serviceprofile", []string{testdata("linkerd/books.yaml")}, importer.Linkerd, "", nil},
		{"grpc camelCase", []string{advisedata("grpc-camel.json")}, importer.GRPC, "", []string{`"MaxAttempts"`, `"RetryThrottling"`}},
		// grpc-go reads keys in any case and keeps the last: a second
		// spelling beside the file's would look applied and not be.
		{"grpc PascalCase", []string{advisedata("grpc-pascal.json")}, importer.GRPC, "", []string{`"maxAttempts"`, `"retryThrottling"`, `"initialBackoff"`}},
		{"aws config", []string{testdata("aws/config")}, importer.AWS, "", nil},
	}
	if testing.Short() {
		cases = cases[5:6] // one format under -short; every one in the full run
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { adviseEditsBetter(t, c) })
	}
}

// adviseEditCase is a user's files that check calls UNSAFE or AT RISK, in
// format; route picks the fleet advise starts from, absent are spellings
// the edit must not add.
type adviseEditCase struct {
	name   string
	files  []string
	format importer.Format
	route  string
	absent []string
}

// adviseEditsBetter runs advise --write on c's files and checks its edit:
// the product's parser accepts it, it imports back as the recommendation
// advise printed, and check does better with it over the same cells and
// seeds (fewer collapsed cells for an UNSAFE config, fewer findings for
// an AT RISK one).
func adviseEditsBetter(t *testing.T, c adviseEditCase) {
	const seeds = 1
	dir := t.TempDir()
	var out, errb bytes.Buffer
	a := AdviseOptions{CheckOptions: CheckOptions{Seeds: seeds, Out: t.TempDir()}, Route: c.route, Write: dir, Top: 3}
	if err := RunAdvise(context.Background(), c.files, a, IO{Stdout: &out, Stderr: &errb}); err != nil {
		t.Fatalf("advise: %v\n%s%s", err, errb.String(), out.String())
	}
	m := regexp.MustCompile(`(?m)^Recommended, as .* writes it: (.*)$`).FindStringSubmatch(out.String())
	if m == nil {
		t.Fatalf("advise recommends no edit:\n%s", out.String())
	}
	recName := m[1]

	// The files as edited: the originals, with what --write wrote in
	// place of each (a new file beside them).
	orig := readSources(t, c.files)
	edited := readSources(t, c.files)
	written, _ := os.ReadDir(dir)
	var eds []importer.Edited
	for _, w := range written {
		after, err := os.ReadFile(filepath.Join(dir, w.Name()))
		if err != nil {
			t.Fatal(err)
		}
		name := w.Name()
		var before []byte
		for i, s := range edited {
			if filepath.Base(s.Name) == w.Name() {
				name, before = s.Name, s.Data
				edited[i].Data = after
			}
		}
		if before == nil {
			edited = append(edited, importer.Source{Name: name, Data: after})
		}
		eds = append(eds, importer.Edited{Name: name, Before: before, After: after})
		for _, a := range c.absent {
			if bytes.Contains(after, []byte(a)) {
				t.Errorf("the edit of %s writes %s, a second spelling of a key the file has", name, a)
			}
		}
	}
	if len(eds) == 0 {
		t.Fatalf("advise --write wrote nothing:\n%s", errb.String())
	}
	if err := importer.ValidateEdited(c.format, eds); err != nil {
		t.Errorf("the product refuses the edit: %v", err)
	}

	// It imports back as the recommendation advise printed.
	start := startOf(t, orig, c.route)
	cands, err := importer.Writable(orig, start, importer.WritableOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var want *importer.Candidate
	for i := range cands {
		if cands[i].Name == recName {
			want = &cands[i]
		}
	}
	if want == nil {
		t.Fatalf("%q is not among what the format writes", recName)
	}
	back, err := importer.Import(edited, importer.Options{})
	if err != nil {
		t.Fatalf("the edited files do not import: %v", err)
	}
	got, ok := fleetAt(back, want.Fleet.Origin)
	if !ok {
		t.Fatalf("no fleet at %s in the edited files", want.Fleet.Origin)
	}
	if d := importer.Differences(got.Fleet, want.Fleet.Fleet, c.format); len(d) > 0 {
		t.Errorf("the edited files read as %v, not as %q", d, recName)
	}

	// check does better on the edited files, over the same cells.
	before, beforeLevel := checkFleet(t, orig, start.Origin, seeds)
	after, _ := checkFleet(t, edited, want.Fleet.Origin, seeds)
	collapsed := func(f verdict.CheckFleet) (n int) {
		for _, x := range f.Findings {
			if x.What == "collapse" || x.What == "never_healthy" {
				n++
			}
		}
		return n
	}
	switch beforeLevel {
	case verdict.Unsafe:
		if collapsed(after) >= collapsed(before) {
			t.Errorf("check finds %d collapsed cells after the edit, %d before", collapsed(after), collapsed(before))
		}
	case verdict.AtRisk:
		if len(after.Findings) >= len(before.Findings) {
			t.Errorf("check finds %d findings after the edit, %d before", len(after.Findings), len(before.Findings))
		}
	default:
		t.Fatalf("%s is %s before the edit: not a case for this test", c.name, beforeLevel)
	}
	t.Logf("%s: %s → %q: collapsed %d → %d, findings %d → %d", c.name, beforeLevel, recName, collapsed(before), collapsed(after), len(before.Findings), len(after.Findings))
}

func readSources(t *testing.T, files []string) []importer.Source {
	t.Helper()
	var out []importer.Source
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, importer.Source{Name: f, Data: b})
	}
	return out
}

// startOf is the fleet advise starts from, as it picks it.
func startOf(t *testing.T, srcs []importer.Source, route string) importer.Fleet {
	t.Helper()
	fl, err := importer.Import(srcs, importer.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var in []verdict.CheckInput
	for _, f := range fl {
		in = append(in, verdict.CheckInput{Fleet: f.Fleet, Origin: f.Origin})
	}
	pick, err := userconfig.Pick(in, route)
	if err != nil {
		t.Fatal(err)
	}
	f, _ := fleetAt(fl, pick.Origin)
	return f
}

func fleetAt(fl []importer.Fleet, origin string) (importer.Fleet, bool) {
	for _, f := range fl {
		if f.Origin == origin {
			return f, true
		}
	}
	return importer.Fleet{}, false
}

// checkFleet checks the fleet at origin in srcs as check does (without
// the margin, with the embedded storm as the base), the files read from
// srcs.
func checkFleet(t *testing.T, srcs []importer.Source, origin string, seeds int) (verdict.CheckFleet, verdict.Level) {
	t.Helper()
	var files []string
	for _, s := range srcs {
		files = append(files, s.Name)
	}
	rd := userconfig.Reader{ReadFile: func(name string) ([]byte, error) {
		for _, s := range srcs {
			if s.Name == name {
				return s.Data, nil
			}
		}
		return os.ReadFile(name)
	}}
	in, b, _, _, err := rd.Files(files, "", "", importer.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, ci := range in {
		if ci.Origin == origin {
			r, err := verdict.Check(context.Background(), []verdict.CheckInput{ci}, verdict.CheckOptions{Base: b, Seeds: seeds, NoMargin: true}, experiment.Options{})
			if err != nil {
				t.Fatal(err)
			}
			return r.Fleets[0], r.Level(0)
		}
	}
	t.Fatalf("no fleet at %s", origin)
	return verdict.CheckFleet{}, 0
}

// TestAdviseChainsWrite: advise --stack and advise --manifests write each
// layer's edit under advise's rules: into --write DIR under the file's own
// name, each accepted by its product and read back; a config held in a
// ConfigMap's data is printed as a diff and never written; the inputs are
// untouched.
func TestAdviseChainsWrite(t *testing.T) {
	for _, c := range []struct {
		name      string
		ci        CI
		written   []string
		printed   []string
		formats   map[string]importer.Format
		inputsDir string
	}{
		{"stack", CI{Stack: []string{stackdata("app-grpc.json"), stackdata("mesh.yaml"), stackdata("gateway.yaml")}}, []string{"app-grpc.json", "mesh.yaml", "gateway.yaml"}, nil,
			map[string]importer.Format{"app-grpc.json": importer.GRPC, "mesh.yaml": importer.Istio, "gateway.yaml": importer.Istio}, filepath.Join("testdata", "stack")},
		{"manifests", CI{Manifests: filepath.Join("testdata", "manifests")}, []string{"gateway.yaml"}, []string{"#ConfigMap orders-grpc/service-config.json", "not written, as the manifest holds it as a string"},
			map[string]importer.Format{"gateway.yaml": importer.Istio}, filepath.Join("testdata", "manifests")},
	} {
		t.Run(c.name, func(t *testing.T) {
			if race.Enabled {
				t.Skip("a search of many simulations: the plain pass runs it, not -race")
			}
			before := snapshot(t, c.inputsDir)
			dir := t.TempDir()
			var out, errb bytes.Buffer
			a := AdviseOptions{CheckOptions: CheckOptions{Seeds: 1, Base: shortBase(), CI: c.ci}, Write: dir}
			if err := RunAdviseChains(context.Background(), nil, a, IO{Stdout: &out, Stderr: &errb}); err != nil {
				t.Fatalf("%v\n%s%s", err, errb.String(), out.String())
			}
			for _, p := range c.printed {
				if !strings.Contains(out.String(), p) {
					t.Errorf("advise does not print %q:\n%s", p, out.String())
				}
			}
			got, _ := os.ReadDir(dir)
			var names []string
			for _, g := range got {
				names = append(names, g.Name())
				after, _ := os.ReadFile(filepath.Join(dir, g.Name()))
				f, ok := c.formats[g.Name()]
				if !ok {
					t.Errorf("advise wrote %s, not a layer's file", g.Name())
					continue
				}
				if err := importer.ValidateEdited(f, []importer.Edited{{Name: g.Name(), After: after}}); err != nil {
					t.Errorf("%s: %v", g.Name(), err)
				}
				if _, err := importer.Import([]importer.Source{{Name: g.Name(), Data: after}}, importer.Options{}); err != nil {
					t.Errorf("%s does not import: %v", g.Name(), err)
				}
			}
			slices.Sort(names)
			want := slices.Sorted(slices.Values(c.written))
			if !slices.Equal(names, want) {
				t.Errorf("written %v, want %v\n%s", names, want, out.String())
			}
			if after := snapshot(t, c.inputsDir); !maps.Equal(before, after) {
				t.Error("advise --write changed its inputs")
			}
		})
	}
}

// snapshot is every file under dir and its content.
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		out[p] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
