package importer

import (
	"strings"
	"testing"
)

// BenchmarkWritable is the cost of one format's space: every candidate
// written into the user's files, checked by the product's parser and
// imported back, as advise does before it simulates any.
func BenchmarkWritable(b *testing.B) {
	for _, files := range [][]string{
		{"envoy/route.yaml", "envoy/cluster.yaml"},
		{"envoy/front-proxy.yaml"},
		{"istio/reviews.yaml"},
		{"istio/destination-rule-reviews.yaml"},
		{"linkerd/books.yaml"},
		{"grpc/service-config.json"},
		{"aws/config"},
		{"nginx/nginx.conf"},
		{"haproxy/haproxy.cfg"},
	} {
		srcs := readSources(b, files...)
		fl, err := Import(srcs, Options{})
		if err != nil {
			b.Fatal(err)
		}
		b.Run(strings.Join(files, "+"), func(b *testing.B) {
			b.ReportAllocs()
			n := 0
			for b.Loop() {
				c, err := Writable(srcs, fl[0], WritableOptions{})
				if err != nil {
					b.Fatal(err)
				}
				n = len(c)
			}
			b.ReportMetric(float64(n), "candidates")
		})
	}
}
