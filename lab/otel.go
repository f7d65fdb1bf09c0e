package lab

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	"go.opentelemetry.io/otel/semconv/v1.43.0/httpconv"
	"go.opentelemetry.io/otel/semconv/v1.43.0/rpcconv"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// The origin's OpenTelemetry metrics: the server-side duration of every
// call as OpenTelemetry's semantic conventions name it,
// http.server.request.duration for the HTTP edge and
// rpc.server.call.duration for the gRPC edge, with their attributes. They
// come from an OpenTelemetry MeterProvider of the origin's own, whose
// reader is OpenTelemetry's Prometheus exporter on the origin's registry:
// /metrics serves them beside the origin's Prometheus metrics, as
// http_server_request_duration_seconds and
// rpc_server_call_duration_seconds, which is how a service instrumented
// with OpenTelemetry is scraped. (The simulator's vocabulary stays in the
// retrystorm_origin_* metrics; these are what any instrumented server
// reports, for dashboards built on the conventions.)

// otelScope is the instrumentation scope of the lab's meters.
const otelScope = "github.com/retrystorm/retrystorm/lab"

// originOTel is an origin's OpenTelemetry instruments.
type originOTel struct {
	http httpconv.ServerRequestDuration
	rpc  rpcconv.ServerCallDuration
	// The attribute sets the edges record with, made once: by method and
	// result (HTTP), by status code (gRPC).
	httpSets [2][nResults]metric.RecordOption
	rpcSets  [codes.Unauthenticated + 1]metric.RecordOption
}

// newOriginOTel makes the instruments on a MeterProvider whose reader is
// the Prometheus exporter, registered on reg.
func newOriginOTel(reg prometheus.Registerer) (*originOTel, error) {
	exp, err := otelprom.New(otelprom.WithRegisterer(reg))
	if err != nil {
		return nil, fmt.Errorf("lab: origin metrics: %w", err)
	}
	// The resource is set here, not read from OTEL_* variables: the
	// lab's output must not depend on the environment.
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp),
		sdkmetric.WithResource(resource.NewSchemaless(attribute.String("service.name", "retrystorm-origin"))))
	m := mp.Meter(otelScope)
	o := &originOTel{}
	if o.http, err = httpconv.NewServerRequestDuration(m); err != nil {
		return nil, fmt.Errorf("lab: origin metrics: %w", err)
	}
	if o.rpc, err = rpcconv.NewServerCallDuration(m); err != nil {
		return nil, fmt.Errorf("lab: origin metrics: %w", err)
	}
	for i, method := range [2]string{http.MethodGet, http.MethodPost} {
		for res := range result(nResults) {
			kv := []attribute.KeyValue{
				attribute.String("http.request.method", method),
				attribute.String("url.scheme", "http"),
			}
			if code, ok := httpStatus(res); ok {
				kv = append(kv, attribute.Int("http.response.status_code", code))
				if code >= 500 {
					kv = append(kv, attribute.String("error.type", strconv.Itoa(code)))
				}
			} else {
				kv = append(kv, attribute.String("error.type", "canceled"))
			}
			o.httpSets[i][res] = metric.WithAttributeSet(attribute.NewSet(kv...))
		}
	}
	for c := range o.rpcSets {
		kv := []attribute.KeyValue{
			attribute.String("rpc.system.name", string(rpcconv.SystemNameGRPC)),
			attribute.String("rpc.method", grpcMethod),
			attribute.String("rpc.response.status_code", codeNames[c]),
		}
		if c != int(codes.OK) {
			kv = append(kv, attribute.String("error.type", codeNames[c]))
		}
		o.rpcSets[c] = metric.WithAttributeSet(attribute.NewSet(kv...))
	}
	return o, nil
}

// httpStatus is the status code the HTTP edge answers res with; false for
// none (the client left).
func httpStatus(res result) (int, bool) {
	switch res {
	case resOK:
		return http.StatusOK, true
	case resNone:
		return 0, false
	}
	return http.StatusServiceUnavailable, true
}

// httpServed records one request of the HTTP edge.
func (o *originOTel) httpServed(ctx context.Context, method string, res result, took time.Duration) {
	i := 0
	if method != http.MethodGet {
		i = 1 // the lab sends GET and POST; a POST stands for the others
	}
	o.http.Inst().Record(ctx, took.Seconds(), o.httpSets[i][res])
}

// interceptor records every call of the gRPC edge, those that its other
// interceptors refused included: it is the outermost.
func (o *originOTel) interceptor() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		start := time.Now()
		resp, err := handler(ctx, req)
		c := status.Code(err)
		if int(c) >= len(o.rpcSets) {
			c = codes.Unknown // not a code gRPC defines
		}
		o.rpc.Inst().Record(ctx, time.Since(start).Seconds(), o.rpcSets[c])
		return resp, err
	}
}

// codeName is c's name as gRPC's specification writes it, UNKNOWN for a
// code it does not define.
func codeName(c codes.Code) string {
	if int(c) < len(codeNames) {
		return codeNames[c]
	}
	return codeNames[codes.Unknown]
}

// codeNames are gRPC's status codes as its specification writes them, as
// rpc.response.status_code takes them.
var codeNames = [...]string{
	"OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND",
	"ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION",
	"ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS",
	"UNAUTHENTICATED",
}
