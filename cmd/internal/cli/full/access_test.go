package full

import (
	"encoding/pem"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The secrets of these tests: none may be printed or written.
const (
	token  = "s3cr3t-t0ken"
	wrong  = "wr0ng-s3cr3t"
	apiKey = "k3y-v4lue"
)

// authProxy is a TLS reverse proxy to target, as Prometheus is often run
// behind one: it passes on the requests ok lets in and answers 401 to
// the others.
func authProxy(t *testing.T, target *url.URL, ok func(*http.Request) bool) *httptest.Server {
	t.Helper()
	rp := httputil.NewSingleHostReverseProxy(target)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !ok(r) {
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		rp.ServeHTTP(w, r)
	}))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv
}

// accessFiles writes, in a directory of their own, the CA of srv's
// certificate (ca.pem), the token and a wrong one, and http_config
// files with the token inline and the CA (auth.yml), and the same with a
// secret where a boolean goes (typo.yml).
func accessFiles(t *testing.T, srv *httptest.Server) string {
	t.Helper()
	dir := t.TempDir()
	for name, data := range map[string]string{
		"ca.pem":   string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})),
		"token":    token + "\n",
		"wrong":    wrong + "\n",
		"auth.yml": "bearer_token: " + token + "\ntls_config: {ca_file: ca.pem}\n",
		"typo.yml": "bearer_token: " + token + "\ntls_config: {ca_file: ca.pem, insecure_skip_verify: " + apiKey + "}\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// noSecret fails t if any of texts holds a secret.
func noSecret(t *testing.T, what string, texts ...string) {
	t.Helper()
	for _, s := range texts {
		for _, secret := range []string{token, wrong, apiKey} {
			if strings.Contains(s, secret) {
				t.Errorf("%s shows a secret:\n%s", what, s)
			}
		}
	}
}

// TestAccessRefusedCLI: calibrate, replay and check --prometheus against a
// Prometheus (behind TLS) that refuses the credentials exit 2, saying what
// was refused (the token's file, the header's name) and printing no
// secret, in text or --json; the flags' own mistakes are exit 2 before
// anything is sent.
func TestAccessRefusedCLI(t *testing.T) {
	nowhere, _ := url.Parse("http://127.0.0.1:1")
	srv := authProxy(t, nowhere, func(*http.Request) bool { return false })
	dir := accessFiles(t, srv)
	at := func(name string) string { return filepath.Join(dir, name) }
	route := importerData("envoy/route.yaml")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"calibrate", "--bearer-token-file", at("wrong"), "--ca-file", at("ca.pem")},
			"refused the request (401 Unauthorized) sent with the bearer token of " + at("wrong")},
		{[]string{"replay", "--json", "--bearer-token-file", at("wrong"), "--ca-file", at("ca.pem")},
			"refused the request (401 Unauthorized) sent with the bearer token of " + at("wrong")},
		{[]string{"check", route, "--json", "--header", "X-Api-Key: " + apiKey, "--ca-file", at("ca.pem")},
			"refused the request (401 Unauthorized) sent with the header X-Api-Key: check them"},
		{[]string{"calibrate", "--ca-file", at("ca.pem")}, "sent with no credentials: give the credentials it takes"},
		{[]string{"calibrate", "--bearer-token-file", at("token")}, "signed by a CA this machine does not trust: give --ca-file FILE"},
		{[]string{"calibrate", "--http-config", at("typo.yml")}, "typo.yml: line 2: cannot unmarshal !!str (a value) into bool"},
		{[]string{"calibrate", "--http-config", at("auth.yml"), "--bearer-token-file", at("token")}, "both set the credentials: give them in one place"},
		{[]string{"replay", "--http-config", at("auth.yml")}, "refused the request (401 Unauthorized) sent with the authorization of --http-config " + at("auth.yml")},
		{[]string{"calibrate", "--basic-auth", "reader"}, "--basic-auth reader needs --basic-auth-password-file FILE"},
		{[]string{"calibrate", "--header", "Authorization: Bearer " + apiKey}, "--header Authorization: Prometheus's client sets that header itself: give --bearer-token-file"},
		{[]string{"calibrate", "--header", apiKey}, "--header wants 'Name: value'"},
	} {
		args := append(c.args, "--prometheus", srv.URL, "--timeout", "5s")
		r := runCLI(t, args...)
		if r.code != 2 || !strings.Contains(oneLine(r.stderr), c.want) || r.stdout != "" {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want exit 2 saying %q", strings.Join(args, " "), r.code, r.stdout, r.stderr, c.want)
		}
		noSecret(t, strings.Join(c.args[:1], " "), r.stdout, r.stderr)
	}
}
