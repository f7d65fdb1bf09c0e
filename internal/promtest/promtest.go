// Package promtest runs a real Prometheus server for a test: on a free
// port of 127.0.0.1, with its own configuration and data directory,
// scraping every second, killed when the test ends. The calibrate and
// replay tests scrape the lab's servers with it.
package promtest

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
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

// WriteTargets lists hosts in file, for FileSD, all at once: written
// beside it and renamed, so that Prometheus never reads half a list.
func WriteTargets(file string, hosts ...string) error {
	b, err := json.Marshal([]map[string]any{{"targets": hosts}})
	if err != nil {
		return err
	}
	tmp := file + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, file)
}

// Start runs the prometheus binary bin, scraping the job "lab" of the
// scrape configuration scrape (Static or FileSD) every second, and
// returns its URL once it answers. It is killed when t ends; its log is
// shown if t failed. The port is found free and then given to
// Prometheus, so another process may take it in between: a Prometheus
// that exits before it answers is started again on another port, up to
// three times.
func Start(t testing.TB, ctx context.Context, bin, scrape string) string {
	t.Helper()
	dir := t.TempDir()
	cfg := fmt.Sprintf("global: {scrape_interval: 1s, scrape_timeout: 900ms}\nscrape_configs:\n  - job_name: lab\n    %s\n", scrape)
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	const tries = 3
	for try := 1; ; try++ {
		u, exited, log := start(t, ctx, bin, dir)
		if !exited {
			return u
		}
		if try == tries || ctx.Err() != nil {
			t.Fatalf("prometheus exited before it answered, %d times; its last log:\n%s", try, log)
		}
	}
}

// start runs one Prometheus on a port found free, and returns its URL
// once it answers, or exited true and its log when it exits first (its
// port taken, say). It fails t when it neither answers nor exits within
// 15 s.
func start(t testing.TB, ctx context.Context, bin, dir string) (u string, exited bool, log string) {
	t.Helper()
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
	logs := new(syncBuilder)
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	stop := func() {
		_ = cmd.Process.Kill()
		<-done
	}
	u = "http://" + addr
	client, err := api.NewClient(api.Config{Address: u})
	if err != nil {
		stop()
		t.Fatal(err)
	}
	prom := v1.NewAPI(client)
	for deadline := time.Now().Add(15 * time.Second); ; {
		select {
		case <-done:
			return "", true, logs.String()
		case <-time.After(200 * time.Millisecond):
		}
		if _, err := prom.Buildinfo(ctx); err == nil {
			t.Cleanup(func() {
				stop()
				if t.Failed() {
					t.Logf("prometheus's log:\n%s", logs.String())
				}
			})
			return u, false, ""
		} else if time.Now().After(deadline) {
			stop()
			t.Fatalf("prometheus at %s not ready within 15 s: %v\n%s", u, err, logs.String())
		}
	}
}

// syncBuilder is a strings.Builder that the process's output may write
// while the test reads it.
type syncBuilder struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuilder) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuilder) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
