package configcmd

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// servicePolicy is one generated service's retries: its gateway route's
// attempts, its client's gRPC maxAttempts, and whether the client's
// service config has retryThrottling (10 tokens, ratio 0.1).
type servicePolicy struct {
	attempts, maxAttempts int
	throttle              bool
}

// writeServices writes n services into dir, each a gateway route (Istio),
// a Service, a Deployment of 3 and a ConfigMap holding the client's gRPC
// service config, as a company's platform templates would; policy gives
// service i's retries.
func writeServices(tb testing.TB, dir string, n int, policy func(i int) servicePolicy) {
	tb.Helper()
	for i := range n {
		p := policy(i)
		throttle := ""
		if p.throttle {
			throttle = `"retryThrottling": {"maxTokens": 10, "tokenRatio": 0.1}, `
		}
		m := fmt.Sprintf(`apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: svc%[1]d-edge, namespace: istio-system}
spec:
  hosts: [svc%[1]d.example.com]
  gateways: [istio-system/ingress]
  http:
  - route:
    - destination: {host: svc%[1]d.shop.svc.cluster.local}
    retries: {attempts: %[2]d, perTryTimeout: 5s, retryOn: 5xx}
---
apiVersion: v1
kind: Service
metadata: {name: svc%[1]d, namespace: shop}
spec: {selector: {app: svc%[1]d}}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: svc%[1]d, namespace: shop}
spec:
  replicas: 3
  template:
    metadata: {labels: {app: svc%[1]d}}
    spec:
      volumes: [{name: grpc, configMap: {name: svc%[1]d-grpc}}]
---
apiVersion: v1
kind: ConfigMap
metadata: {name: svc%[1]d-grpc, namespace: shop}
data:
  service-config.json: '{%[4]s"methodConfig": [{"name": [{"service": "shop.Next"}], "retryPolicy": {"maxAttempts": %[3]d, "initialBackoff": "0.1s", "maxBackoff": "1s", "backoffMultiplier": 2, "retryableStatusCodes": ["UNAVAILABLE"]}}]}'
`, i, p.attempts, p.maxAttempts, throttle)
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("svc%04d.yaml", i)), []byte(m), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
}

// BenchmarkManifests1000 is check --manifests over 1,000 services of 18
// distinct chains (issue 40: under 15 s on two cores), with check's
// defaults: three seeds, the storm's base.
//
//	go test -run '^$' -bench Manifests1000 -benchtime 1x ./cmd/internal/configcmd
func BenchmarkManifests1000(b *testing.B) {
	dir := b.TempDir()
	// 18 distinct chains: the route's attempts 1 to 3, the client's
	// maxAttempts 2 to 4, with and without retryThrottling.
	writeServices(b, dir, 1000, func(i int) servicePolicy {
		return servicePolicy{attempts: 1 + i/2%3, maxAttempts: 2 + i/6%3, throttle: i%2 == 1}
	})
	var r struct {
		Chains    []json.RawMessage
		Simulated int `json:"chains_simulated"`
	}
	for b.Loop() {
		var out bytes.Buffer
		err := RunCheck(context.Background(), nil, CheckOptions{JSON: true, CI: CI{Manifests: dir}}, IO{Stdout: &out, Stderr: &bytes.Buffer{}})
		if err != nil && !errors.Is(err, ErrUnsafe) {
			b.Fatal(err)
		}
		if err := json.Unmarshal(out.Bytes(), &r); err != nil {
			b.Fatal(err)
		}
	}
	if len(r.Chains) != 1000 || r.Simulated != 18 {
		b.Fatalf("%d chains, %d simulated: want 1000 chains, 18 distinct", len(r.Chains), r.Simulated)
	}
	b.ReportMetric(float64(r.Simulated), "chains-simulated")
}
