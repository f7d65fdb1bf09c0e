package importer

import (
	"fmt"
	"strings"
	"testing"
)

// manyRoutes is the Envoy config: n routes under one virtual
// host, all with the virtual host's retry policy.
func manyRoutes(n int) []byte {
	var b strings.Builder
	b.WriteString("virtual_hosts:\n- name: v\n  domains: ['*']\n  retry_policy: {retry_on: 5xx}\n  routes:\n")
	for range n {
		b.WriteString("  - {route: {cluster: c}}\n")
	}
	return []byte(b.String())
}

func BenchmarkImportManyRoutes(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		data := manyRoutes(n)
		base := storm(b)
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				fl, err := Import([]Source{{Name: "envoy.yaml", Data: data}}, Options{})
				if err != nil {
					b.Fatal(err)
				}
				if _, err := Write(fl, base); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
