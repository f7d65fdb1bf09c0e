// Package promtest runs a real Prometheus server for a test: on a free
// port of 127.0.0.1, with its own configuration and data directory,
// scraping every second, killed when the test ends. The calibrate and
// replay tests scrape the lab's servers with it.
package promtest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/api"
	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
)

// Static is the scrape configuration of a fixed list of host:port
// targets.
func Static(hosts ...string) string {
	q := make([]string, len(hosts))
	for i, h := range hosts {
		q[i] = fmt.Sprintf("%q", h)
	}
	return fmt.Sprintf("static_configs: [{targets: [%s]}]", strings.Join(q, ", "))
}

// FileSD is the scrape configuration of the targets a file lists
// (Prometheus's file discovery), read again every second: for servers
// that come up after Prometheus does.
func FileSD(file string) string {
	return fmt.Sprintf("file_sd_configs: [{files: [%q], refresh_interval: 1s}]", file)
}

// Start runs the prometheus binary bin, scraping the job "lab" of the
// scrape configuration scrape (Static or FileSD) every second, and
// returns its URL once it answers. It is killed when t ends; its log is
// shown if t failed.
func Start(t testing.TB, ctx context.Context, bin, scrape string) string {
	t.Helper()
	dir := t.TempDir()
	cfg := fmt.Sprintf("global: {scrape_interval: 1s, scrape_timeout: 900ms}\nscrape_configs:\n  - job_name: lab\n    %s\n", scrape)
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	cmd := exec.CommandContext(ctx, bin,
		"--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr,
		"--log.level=warn")
	var logs strings.Builder
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("prometheus's log:\n%s", logs.String())
		}
	})
	u := "http://" + addr
	client, err := api.NewClient(api.Config{Address: u})
	if err != nil {
		t.Fatal(err)
	}
	prom := v1.NewAPI(client)
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		if _, err := prom.Buildinfo(ctx); err == nil {
			return u
		} else if time.Now().After(deadline) {
			t.Fatalf("prometheus at %s not ready within 15 s: %v", u, err)
		}
	}
}
