package importer

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/retrystorm/retrystorm/internal/servertest"
)

// realCheck is one edited configuration for a product's own config test.
type realCheck struct {
	name string // the fleet and the candidate
	file []byte
}

// writableChecks are the files of the candidates Writable makes, with and
// without Conditions, for every fleet of each configuration, the user's
// own first, each once: each that changes one setting, and the first that changes
// the most its space can (every edit of the others is in those: the edits
// of two settings are on lines of their own, and the new lines of a block
// follow its opening line, whichever are added).
func writableChecks(t *testing.T, confs map[string]string) []realCheck {
	t.Helper()
	var out []realCheck
	seen := map[string]bool{}
	for name, conf := range confs {
		srcs := []Source{{Name: name, Data: []byte(conf)}}
		fl, err := Import(srcs, Options{})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, from := range fl {
			for _, cond := range []bool{false, true} {
				cands, err := Writable(srcs, from, WritableOptions{Conditions: cond})
				if err != nil {
					t.Fatalf("%s: %v", from.Origin, err)
				}
				most := 0
				for _, c := range cands {
					most = max(most, changed(c.Pick))
				}
				took := false
				for _, c := range cands {
					n := changed(c.Pick)
					if (c.Name == AsItIs && cond) || (n > 1 && (n < most || took)) {
						continue
					}
					took = took || (n > 1 && n == most)
					file := applyEdits(srcs, c.Edited)[0].Data
					if !seen[string(file)] {
						seen[string(file)] = true
						out = append(out, realCheck{from.Origin + ": " + c.Name, file})
					}
				}
			}
		}
	}
	return out
}

// runChecks runs check on every file, four at a time (the programs mostly
// wait), and fails t for each the program refuses.
func runChecks(t *testing.T, checks []realCheck, check func(dir string, file []byte) ([]byte, error)) {
	t.Helper()
	var wg sync.WaitGroup
	sem := make(chan struct{}, 4)
	for _, c := range checks {
		dir := t.TempDir()
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			if out, err := check(dir, c.file); err != nil {
				t.Errorf("%s: refused (%v):\n%s\n%s", c.name, err, out, c.file)
			}
		}()
	}
	wg.Wait()
	t.Logf("%d edited configurations accepted", len(checks))
}

// TestWritableRealConfigCheck: every candidate nginx and HAProxy can
// write, on the project's examples and on configurations that exercise
// each setting of their spaces, is accepted by the real product's own
// configuration test: nginx -t (nginx 1.22, with a prefix directory and
// the temporary paths in it) and haproxy -c (HAProxy 2.6). Writable itself
// checks the edits with the importer's readers alone; this pins those to
// the products.
func TestWritableRealConfigCheck(t *testing.T) {
	t.Run("nginx", func(t *testing.T) {
		bin := servertest.Need(t, "nginx", "nginx")
		example := readSources(t, "nginx/nginx.conf")[0]
		checks := writableChecks(t, map[string]string{
			"example.conf": string(example.Data),
			"six.conf":     ngxConf(servers(6, ""), "", "            proxy_next_upstream error timeout http_500 non_idempotent;\n            proxy_read_timeout 3s;"),
			"off.conf":     ngxConf(servers(3, "max_fails=0"), "        proxy_next_upstream_tries 5;", "            proxy_next_upstream off;"),
			"comments.conf": ngxConf([]string{"server 10.0.0.1:8080 max_fails=2; # one", "server 10.0.0.2:8080 weight=2;", "server 10.0.0.9:8080 backup;"}, "",
				"            location /inner/ { proxy_pass http://app; }"),
		})
		runChecks(t, checks, func(dir string, file []byte) ([]byte, error) {
			return nginxTest(bin, dir, file)
		})
	})
	t.Run("haproxy", func(t *testing.T) {
		bin := servertest.Need(t, "haproxy", "haproxy")
		example := readSources(t, "haproxy/haproxy.cfg")[0]
		checks := writableChecks(t, map[string]string{
			"example.cfg": string(example.Data),
			"every.cfg":   hapWritableConf(hapHTTP, "    retries 5\n    retry-on all-retryable-errors\n"+hapTwo),
			"tcp.cfg":     hapWritableConf("    mode tcp\n    retries 2\n", "    server s1 10.0.0.1:8080 check inter 1s # first\n    server s2 10.0.0.2:8080\n"),
			"none.cfg":    hapWritableConf(hapHTTP, "    retry-on none\n    option redispatch\n"+hapTwo),
		})
		runChecks(t, checks, func(dir string, file []byte) ([]byte, error) {
			cfg := filepath.Join(dir, "haproxy.cfg")
			if err := os.WriteFile(cfg, file, 0o600); err != nil {
				return nil, err
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			return exec.CommandContext(ctx, bin, "-c", "-q", "-f", cfg).CombinedOutput()
		})
	})
}

// nginxTest runs nginx -t on file, in dir as nginx's prefix, with the
// temporary paths and the error log in dir (nginx opens them at -t, and
// the compiled-in ones need root).
func nginxTest(bin, dir string, file []byte) ([]byte, error) {
	ds, err := parseNginx("nginx.conf", file)
	if err != nil {
		return nil, err
	}
	tf := newTextFile(Source{Name: "nginx.conf", Data: file})
	for _, h := range ngxFind(ds, "http") {
		for _, p := range []string{"client_body", "proxy", "fastcgi", "uwsgi", "scgi"} {
			if !tf.setDirective(h, p+"_temp_path", filepath.Join(dir, p)) {
				return nil, os.ErrInvalid
			}
		}
	}
	conf := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(conf, tf.bytes(), 0o600); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "-t", "-q", "-p", dir+"/", "-c", conf, "-e", filepath.Join(dir, "error.log")).CombinedOutput()
	if err == nil && strings.Contains(string(out), "[emerg]") {
		err = os.ErrInvalid
	}
	return out, err
}
