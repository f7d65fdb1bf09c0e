package servertest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// HAProxy is HAProxy in front of a service inside it, as docs/lab.md sets
// it up: a Lua service that takes Service a request, Maxconn at a time
// (the backend's server maxconn), a queue timeout of Queue, and, with
// Exporter, HAProxy's own Prometheus exporter (promex) on a port of its
// own at /metrics.
type HAProxy struct {
	Bin      string
	Service  time.Duration
	Maxconn  int
	Queue    time.Duration
	Exporter bool
}

// StartHAProxy runs h until t ends and returns its frontend's address
// and, with h.Exporter, the exporter's ("" without).
func StartHAProxy(t testing.TB, ctx context.Context, h HAProxy) (front, exporter string) {
	t.Helper()
	dir := t.TempDir()
	lua := filepath.Join(dir, "slow.lua")
	if err := os.WriteFile(lua, []byte(fmt.Sprintf(`core.register_service("slow", "http", function(applet)
  core.msleep(%d)
  applet:set_status(200)
  applet:add_header("content-length", "3")
  applet:add_header("content-type", "text/plain")
  applet:start_response()
  applet:send("ok\n")
end)
`, h.Service.Milliseconds())), 0o600); err != nil {
		t.Fatal(err)
	}
	ports, ready := 2, HTTPReady(0, "/") // the frontend, and the Lua service behind it
	if h.Exporter {
		ports, ready = 3, HTTPReady(2, "/metrics")
	}
	addrs := Start(t, ctx, Program{
		Name:  "haproxy",
		Bin:   h.Bin,
		Ports: ports,
		Args: func(addrs []string) ([]string, error) {
			cfg := fmt.Sprintf(`global
  maxconn 4000
  lua-load %s
defaults
  mode http
  timeout connect 1s
  timeout client 30s
  timeout server 30s
  timeout queue %dms
frontend storm
  bind %s
  default_backend origin
backend origin
  server worker %s maxconn %d
listen service
  bind %s
  http-request use-service lua.slow
`, lua, h.Queue.Milliseconds(), addrs[0], addrs[1], h.Maxconn, addrs[1])
			if h.Exporter {
				cfg += fmt.Sprintf("frontend stats\n  bind %s\n  http-request use-service prometheus-exporter if { path /metrics }\n", addrs[2])
			}
			file := filepath.Join(dir, "haproxy.cfg")
			return []string{"-db", "-f", file}, os.WriteFile(file, []byte(cfg), 0o600)
		},
		Ready: ready,
	})
	if h.Exporter {
		return addrs[0], addrs[2]
	}
	return addrs[0], ""
}
