package importer

import (
	"os"
	"path/filepath"
	"runtime/metrics"
	"strings"
	"testing"
	"time"

	"github.com/retrystorm/retrystorm/scenario"
)

// The importers' fuzz targets, one a format, end to end: bytes in, then
// either a refusal (what the CLI exits 2 with) that is never the
// importer's own failure, or a scenario file that loads; never a panic,
// and memory bounded by the input.

func FuzzImportEnvoy(f *testing.F) {
	fuzzFormat(f, Envoy, "envoy/front-proxy.yaml", "envoy/route.yaml", "envoy/cluster.yaml")
}

func FuzzImportIstio(f *testing.F) {
	fuzzFormat(f, Istio, "istio/reviews.yaml", "istio/budget.yaml", "istio/naive.yaml")
}

func FuzzImportLinkerd(f *testing.F) { fuzzFormat(f, Linkerd, "linkerd/books.yaml") }

func FuzzImportGRPC(f *testing.F) {
	fuzzFormat(f, GRPC, "grpc/service-config.json", "grpc/hedging.json")
}

func FuzzImportAWS(f *testing.F) { fuzzFormat(f, AWS, "aws/config", "aws/env") }

// internalFailures are what an importer says when it failed, not the
// input: none may reach a user.
var internalFailures = []string{"a bug", "cannot represent", "panic"}

func fuzzFormat(f *testing.F, format Format, seeds ...string) {
	for _, file := range seeds {
		d, err := os.ReadFile(filepath.Join("testdata", file))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(d)
	}
	base := storm(f)
	sample := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	allocated := func() uint64 {
		metrics.Read(sample)
		return sample[0].Value.Uint64()
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		before := allocated()
		// Detected, then forced: both paths a user takes.
		for _, o := range []Options{{Timeout: time.Second}, {Format: format, Timeout: time.Second}} {
			fl, err := Import([]Source{{Name: "fuzz", Data: data}}, o)
			if err != nil {
				for _, s := range internalFailures {
					if strings.Contains(err.Error(), s) {
						t.Fatalf("a refusal that is the importer's failure: %v", err)
					}
				}
				continue
			}
			out, err := Write(fl, base)
			if err != nil {
				t.Fatalf("imported, but not written: %v", err)
			}
			if _, err := scenario.Parse("fuzz.yaml", out); err != nil {
				t.Fatalf("the imported scenario does not load: %v\n%s", err, out)
			}
		}
		// A generous bound: a fixed cost (the YAML and protobuf
		// machinery, one scenario written) and a multiple of the input.
		if got, limit := allocated()-before, 64<<20+uint64(2000*len(data)); got > limit {
			t.Fatalf("%d bytes in allocated %d bytes, more than %d", len(data), got, limit)
		}
	})
}
