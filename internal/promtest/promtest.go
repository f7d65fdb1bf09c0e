// Package promtest runs a real Prometheus server for a test: on a free
// port of 127.0.0.1, with its own configuration and data directory,
// scraping every second, killed when the test ends. The calibrate and
// replay tests scrape the lab's servers with it.
package promtest

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/api"
	v1 "github.com/prometheus/client_golang/api/prometheus/v1"

	"github.com/retrystorm/retrystorm/internal/servertest"
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

// StartDiscovering runs Start with file discovery (FileSD) over an empty
// list of targets in the test's own directory, for servers that come up
// after Prometheus does, and returns its URL and the list's file, for
// WriteTargets.
func StartDiscovering(t testing.TB, ctx context.Context, bin string) (url, targets string) {
	t.Helper()
	targets = filepath.Join(t.TempDir(), "targets.json")
	if err := os.WriteFile(targets, []byte("[]"), 0o644); err != nil {
		t.Fatal(err)
	}
	return Start(t, ctx, bin, FileSD(targets)), targets
}

// Start runs the prometheus binary bin, scraping the job "lab" of the
// scrape configuration scrape (Static or FileSD) every second, and
// returns its URL once it answers. It is killed when t ends; its log is
// shown if t failed. A Prometheus that exits before it answers (its port
// taken between finding it free and binding it) is started again on
// another port, up to three times (servertest.Start).
func Start(t testing.TB, ctx context.Context, bin, scrape string) string {
	t.Helper()
	dir := t.TempDir()
	cfg := fmt.Sprintf("global: {scrape_interval: 1s, scrape_timeout: 900ms}\nscrape_configs:\n  - job_name: lab\n    %s\n", scrape)
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	addrs := servertest.Start(t, ctx, servertest.Program{
		Name:  "prometheus",
		Bin:   bin,
		Ports: 1,
		Args: func(addrs []string) ([]string, error) {
			return []string{
				"--config.file=" + filepath.Join(dir, "prometheus.yml"),
				"--storage.tsdb.path=" + filepath.Join(dir, "data"),
				"--web.listen-address=" + addrs[0],
				"--log.level=warn",
			}, nil
		},
		Ready: func(ctx context.Context, addrs []string) error {
			client, err := api.NewClient(api.Config{Address: "http://" + addrs[0]})
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			defer cancel()
			_, err = v1.NewAPI(client).Buildinfo(ctx)
			return err
		},
	})
	return "http://" + addrs[0]
}

// Bin returns the prometheus binary's path, or skips t without one (fails
// it when CI=true, where it must be installed: no test of a claim skips
// there) and under -short, where long says how long the test takes.
func Bin(t testing.TB, long string) string {
	t.Helper()
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("prometheus is not on the PATH; CI must install it")
		}
		t.Skip("prometheus is not on the PATH: install it to run the real-Prometheus tests")
	}
	if testing.Short() {
		t.Skip("-short: " + long)
	}
	return bin
}
