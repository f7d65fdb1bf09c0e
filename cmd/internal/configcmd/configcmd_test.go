package configcmd

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/retrystorm/retrystorm/experiment"
	"github.com/retrystorm/retrystorm/importer"
	"github.com/retrystorm/retrystorm/scenario"
	"github.com/retrystorm/retrystorm/userconfig"
	"github.com/retrystorm/retrystorm/verdict"
)

func testdata(name string) string {
	return filepath.Join("..", "..", "..", "importer", "testdata", name)
}

// TestPickFleet: advise starts from the route named with --route, else
// the first that retries (it once took the first route of the file, one
// with no retries).
func TestPickFleet(t *testing.T) {
	in := []verdict.CheckInput{
		{Fleet: scenario.Fleet{Name: "PUT /books"}, Origin: "sp.yaml: spec.routes[0]"},
		{Fleet: scenario.Fleet{Name: "HEAD /authors", Retry: scenario.Retry{MaxRetries: -1}}, Origin: "sp.yaml: spec.routes[1]"},
	}
	for route, want := range map[string]string{"": "HEAD /authors", "PUT /books": "PUT /books", "routes[0]": "PUT /books"} {
		got, err := userconfig.Pick(in, route)
		if err != nil || got.Fleet.Name != want {
			t.Errorf("--route %q: %q, %v; want %q", route, got.Fleet.Name, err, want)
		}
	}
	if _, err := userconfig.Pick(in, "nope"); err == nil || !strings.Contains(err.Error(), `"PUT /books"`) {
		t.Errorf("--route nope: %v, want a usage error listing the fleets", err)
	}
}

// TestAdviseWritesIntoTheUsersFile: advise on a gRPC service config
// prints its recommendation as a diff of the user's own file: the
// method's name (its scope) and its retryable codes stay, and it says
// the conditions were not searched.
func TestAdviseWritesIntoTheUsersFile(t *testing.T) {
	file := testdata("grpc/service-config.json")
	in, b, _, uf, err := IO{}.reader().Files([]string{file}, "", "", importer.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cand := in[0].Fleet
	cand.Name, cand.Retry.MaxRetries = "2 retries", 2
	r, err := verdict.Advise(context.Background(), in[0], verdict.AdviseOptions{Base: b, Seeds: 1, Space: []scenario.Fleet{cand}}, experiment.Options{})
	if err != nil {
		t.Fatal(err)
	}
	from, ok := uf.Imported(in[0])
	if !ok {
		t.Fatal("the imported fleet is not found again")
	}
	var out bytes.Buffer
	if err := printAdvise(IO{Stdout: &out, Stderr: &out}, r, []importer.Format{importer.GRPC, importer.GoCode}, 3, "", "", &editTarget{srcs: uf.Sources, from: from}); err != nil {
		t.Fatal(err)
	}
	s := out.String()
	for _, want := range []string{"--- " + file, "The retry conditions are yours", ` "name": [{"service": "grpc.examples.echo.Echo"}],`} {
		if !strings.Contains(s, want) {
			t.Errorf("advise does not say %q:\n%s", want, s)
		}
	}
	if strings.Contains(s, `"name": [{}]`) || strings.Contains(s, "INTERNAL") {
		t.Errorf("advise widened the scope or the conditions:\n%s", s)
	}
}
