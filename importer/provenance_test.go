package importer

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// TestProvenanceString: each kind of provenance writes the line import
// has always written above a fleet (the golden files hold them all; this
// names each form).
func TestProvenanceString(t *testing.T) {
	p := &prov{file: "vs.yaml"}
	vs := p.of("VirtualService", "orders")
	for _, tc := range []struct {
		v    *Provenance
		want string
	}{
		{p.set("retry.max_retries", "3", "retries.attempts"),
			"retry.max_retries: 3  <- vs.yaml: retries.attempts"},
		{vs.set("deadline", "2s", "spec.http[0].timeout"),
			"deadline: 2s  <- vs.yaml: VirtualService orders: spec.http[0].timeout"},
		{vs.dflt("deadline", "none", "spec.http[0].timeout", "HTTPRoute.timeout: default is disabled"),
			"deadline: none  <- default (VirtualService orders: spec.http[0].timeout unset; HTTPRoute.timeout: default is disabled)"},
		{p.note("budget", "none", "the route sends no retries"),
			"budget: none  <- the route sends no retries"},
		{p.add(Provenance{Settings: []string{"timeout"}, Value: "none", Default: true, Rule: "the SDK sets none"}),
			"timeout: none  <- default: the SDK sets none"},
		{p.set("timeout", "1s", "methodConfig[0].timeout").and("deadline").by(inParens, "the whole call's"),
			"timeout and deadline: 1s  <- vs.yaml: methodConfig[0].timeout (the whole call's)"},
		{p.set("retry.max_retries", "2", "[default] max_attempts").atLine(8, lineAfter).by(afterComma, "less the first attempt"),
			"retry.max_retries: 2  <- vs.yaml: [default] max_attempts (line 8), less the first attempt"},
		{p.set("budget.use", "adaptive", "AWS_RETRY_MODE").atLine(3, lineBefore),
			"budget.use: adaptive  <- vs.yaml: line 3 (AWS_RETRY_MODE)"},
		{p.set("retry.max_retries", "0", "proxy_pass http://a").atLine(35, lineUnwritten).by(afterSpace, "is one address"),
			"retry.max_retries: 0  <- vs.yaml: proxy_pass http://a is one address"},
		{p.set("origin.replicas", "3", "upstream app").atLine(9, lineAfter).by(afterColon, "its servers not down"),
			"origin.replicas: 3  <- vs.yaml: upstream app (line 9): its servers not down"},
		{p.set("outlier_detection.use", "envoy", "outlier_detection").by(afterSemicolon, "checked after"),
			"outlier_detection.use: envoy  <- vs.yaml: outlier_detection; checked after"},
		{p.took("protocol", "grpc", Provenance{File: "svc.yaml", Object: Object{"Service", "a"}, Rule: "port grpc speaks gRPC", ruleForm: afterColon}),
			"protocol: grpc  <- svc.yaml: Service a: port grpc speaks gRPC"},
	} {
		if got := tc.v.String(); got != tc.want {
			t.Errorf("got  %s\nwant %s", got, tc.want)
		}
	}
}

// TestProvenanceLocated: every setting an importer reads from a file of
// its testdata is located in that file, at a line that exists; a default
// or a derived value is at none.
func TestProvenanceLocated(t *testing.T) {
	dirs, err := filepath.Glob(filepath.Join("testdata", "*"))
	if err != nil {
		t.Fatal(err)
	}
	read := 0
	for _, dir := range dirs {
		if filepath.Base(dir) == "golden" || filepath.Base(dir) == "fuzz" {
			continue
		}
		files, _ := filepath.Glob(filepath.Join(dir, "*"))
		for _, name := range files {
			data, err := os.ReadFile(name)
			if err != nil {
				t.Fatal(err)
			}
			srcs := []Source{{Name: name, Data: data}}
			fl, err := Import(srcs, Options{})
			if err != nil {
				continue // the invalid examples, and files that need another
			}
			lines := 1 + bytes.Count(data, []byte("\n"))
			for _, f := range fl {
				for _, v := range f.From {
					file, line := Locate(srcs, v)
					switch {
					case v.Default || v.File == "":
						if file != "" || line != 0 {
							t.Errorf("%s: %s is not from the file, and is located at %s:%d", name, v, file, line)
						}
					case file != name || line < 1 || line > lines:
						t.Errorf("%s: %s located at %s:%d", name, v, file, line)
					default:
						read++
					}
				}
			}
		}
	}
	if read < 100 {
		t.Errorf("%d settings read from files: the testdata holds more", read)
	}
}

// ExampleSettings: an imported fleet's settings at the file and line a CI
// annotation points at, and where the others came from.
func ExampleSettings() {
	src := Source{Name: "route.yaml", Data: []byte(`virtual_hosts:
- name: api
  domains: ["*"]
  routes:
  - match: {prefix: /}
    route:
      cluster: backend
      timeout: 2s
      retry_policy:
        retry_on: 5xx
        num_retries: 3
`)}
	fl, err := Import([]Source{src}, Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, v := range fl[0].From[:4] {
		file, line := Locate([]Source{src}, v)
		fmt.Printf("%v at %q line %d, default %t\n", v.Settings, file, line, v.Default)
	}
	// Output:
	// [deadline] at "route.yaml" line 8, default false
	// [timeout] at "" line 0, default false
	// [product] at "" line 0, default false
	// [retry.max_retries] at "route.yaml" line 11, default false
}
