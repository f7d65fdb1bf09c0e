package replay_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/retrystorm/retrystorm/replay"
)

// TestTooCostly: a window whose replay the simulator refuses for its
// memory (200,000 intents a second, nine times more for ten steps, a
// queue of 100,000 after: hundreds of GiB) is bad input that says what
// replay can do about it, a shorter window or a longer step, and names no
// flag replay does not have (issue 37: it said to raise the limit, which
// only --max-memory of other commands does).
func TestTooCostly(t *testing.T) {
	const n = 3000
	req, bad := make([]float64, n), make([]float64, n)
	c := 0.0
	for i := range n {
		r := 200000.0
		if i >= 100 && i < 110 {
			r = 900000
		}
		c += r
		req[i] = c
		if i >= 100 {
			bad[i] = (req[i] - req[99]) / 2
		}
	}
	flat := func(v float64) []float64 {
		out := make([]float64, n)
		for i := range out {
			out[i] = v
		}
		return out
	}
	queue := flat(100000)
	for i := range 100 {
		queue[i] = 0
	}
	series := func(name string, v []float64, extra ...string) map[string]any {
		m := map[string]string{"__name__": name, "job": "haproxy", "instance": "lb:8405", "proxy": "app"}
		for i := 0; i < len(extra); i += 2 {
			m[extra[i]] = extra[i+1]
		}
		vs := make([][2]any, n)
		for i, x := range v {
			vs[i] = [2]any{1796047200 + i, fmt.Sprint(x)}
		}
		return map[string]any{"metric": m, "values": vs}
	}
	data, err := json.Marshal(map[string]any{"status": "success", "data": map[string]any{"resultType": "matrix", "result": []any{
		series("haproxy_backend_http_requests_total", req),
		series("haproxy_backend_retry_warnings_total", flat(0)),
		series("haproxy_backend_http_responses_total", req, "code", "2xx"),
		series("haproxy_backend_http_responses_total", bad, "code", "5xx"),
		series("haproxy_backend_current_queue", queue),
		series("haproxy_backend_response_time_average_seconds", flat(0.05)),
		series("haproxy_server_limit_sessions", flat(20000), "server", "a"),
		series("haproxy_server_current_sessions", flat(15000), "server", "a"),
	}}})
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "big.json")
	if err := os.WriteFile(file, data, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = replay.Replay(context.Background(), readWindow(t, file), replay.Options{})
	if !errors.Is(err, replay.ErrInput) || !strings.Contains(err.Error(), "no flag to raise") || !strings.Contains(err.Error(), "--step") || strings.Contains(err.Error(), "raise the limit") {
		t.Errorf("error %v: want bad input saying what replay can do (a shorter window, a longer --step), not to raise a limit", err)
	}
}
