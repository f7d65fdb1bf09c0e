package calibrate_test

import (
	"context"
	"encoding/pem"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retrystorm/retrystorm/calibrate"
)

// The secrets of the access tests: none may be in any message.
const (
	token    = "s3cr3t-t0ken"
	password = "pa55-w0rd"
	apiKey   = "k3y-v4lue"
)

// guarded serves fakeProm's answers over TLS to the requests ok lets in,
// and 401 to the others.
func guarded(t *testing.T, answer []byte, ok func(*http.Request) bool) *httptest.Server {
	t.Helper()
	h := promHandler(t, 1, answer, nil)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !ok(r) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="prometheus"`)
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the untrusted CA's failed handshake
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv
}

// writeFile writes data as dir/name and returns its path.
func writeFile(t *testing.T, dir, name, data string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// accessFiles writes the files of the access tests in a directory of
// their own: the CA of httptest's TLS servers (ca.pem), the token, a wrong
// one, the password, and an http_config file naming them relative to it.
func accessFiles(t *testing.T, srv *httptest.Server) (dir string) {
	t.Helper()
	dir = t.TempDir()
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	writeFile(t, dir, "ca.pem", string(ca))
	writeFile(t, dir, "token", token+"\n")
	writeFile(t, dir, "wrong", "not-the-token\n")
	writeFile(t, dir, "password", password)
	writeFile(t, dir, "http.yml", "authorization:\n  credentials_file: token\ntls_config:\n  ca_file: ca.pem\n")
	return dir
}

// TestFetchAccess reads a window from TLS servers that want each kind of
// credentials (a bearer token, basic auth, a header, an http_config
// file, a password in the URL), through Prometheus's own client config,
// trusting a CA written here; each refusal (a wrong token, none, an
// untrusted CA) says what was refused and names files, never a secret.
func TestFetchAccess(t *testing.T) {
	answer, err := os.ReadFile("testdata/lab.json")
	if err != nil {
		t.Fatal(err)
	}
	bearer := guarded(t, answer, func(r *http.Request) bool { return r.Header.Get("Authorization") == "Bearer "+token })
	basic := guarded(t, answer, func(r *http.Request) bool {
		u, p, ok := r.BasicAuth()
		return ok && u == "prom-reader" && p == password
	})
	header := guarded(t, answer, func(r *http.Request) bool { return r.Header.Get("X-Api-Key") == apiKey })
	dir := accessFiles(t, bearer)
	at := func(name string) string { return filepath.Join(dir, name) }
	withPassword, _ := url.Parse(basic.URL)
	withPassword.User = url.UserPassword("prom-reader", password)

	for _, c := range []struct {
		name   string
		url    string
		access calibrate.Access
		want   string // in the error; "" for none
	}{
		{"bearer token file", bearer.URL, calibrate.Access{BearerTokenFile: at("token"), CAFile: at("ca.pem")}, ""},
		{"basic auth", basic.URL, calibrate.Access{BasicAuthUser: "prom-reader", BasicAuthPasswordFile: at("password"), CAFile: at("ca.pem")}, ""},
		{"header", header.URL, calibrate.Access{Headers: []string{"x-api-key: " + apiKey}, CAFile: at("ca.pem")}, ""},
		{"http_config file", bearer.URL, calibrate.Access{ConfigFile: at("http.yml")}, ""},
		{"password in the URL", withPassword.String(), calibrate.Access{CAFile: at("ca.pem")}, ""},
		{"wrong token", bearer.URL, calibrate.Access{BearerTokenFile: at("wrong"), CAFile: at("ca.pem")},
			"refused the request (401 Unauthorized) sent with the bearer token of " + at("wrong") + ": check them"},
		{"wrong header", header.URL, calibrate.Access{Headers: []string{"X-Api-Key: " + token}, CAFile: at("ca.pem")},
			"refused the request (401 Unauthorized) sent with the header X-Api-Key"},
		{"no credentials", basic.URL, calibrate.Access{CAFile: at("ca.pem")},
			"sent with no credentials: give the credentials it takes: --bearer-token-file, --basic-auth"},
		{"untrusted CA", bearer.URL, calibrate.Access{BearerTokenFile: at("token")},
			"its certificate is signed by a CA this machine does not trust: give --ca-file FILE"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			end := time.Date(2026, 12, 1, 18, 32, 34, 0, time.UTC)
			w, err := calibrate.Fetch(ctx, calibrate.Live{URL: c.url, Start: end.Add(-17 * time.Second), End: end, Step: time.Second, Timeout: 5 * time.Second, Access: c.access})
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case c.want == "" && !w.Has("retrystorm_origin_attempts_total"):
				t.Errorf("the window lacks the lab's metrics: %s", w.Describe())
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Fatalf("error %v, want one saying %q", err, c.want)
			}
			shown := ""
			if err != nil {
				shown = err.Error()
			} else {
				shown = w.Describe()
			}
			for _, secret := range []string{token, password, apiKey} {
				if strings.Contains(shown, secret) {
					t.Errorf("a secret is shown: %s", shown)
				}
			}
		})
	}
}

// TestFetchAccessRedirect: with credentials, a redirect off the server
// given is still refused (issue 37), and the other server never sees a
// request, let alone the token.
func TestFetchAccessRedirect(t *testing.T) {
	var seen atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { seen.Add(1) }))
	defer other.Close()
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+token {
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		http.Redirect(w, r, other.URL+r.URL.Path+"?"+r.URL.RawQuery, http.StatusTemporaryRedirect)
	}))
	defer srv.Close()
	dir := accessFiles(t, srv)
	now := time.Now()
	_, err := calibrate.Fetch(context.Background(), calibrate.Live{URL: srv.URL, Start: now.Add(-time.Minute), End: now, Step: time.Second, Timeout: 5 * time.Second,
		Access: calibrate.Access{ConfigFile: filepath.Join(dir, "http.yml")}})
	if err == nil || !strings.Contains(err.Error(), "redirected to "+other.URL) || strings.Contains(err.Error(), token) {
		t.Fatalf("error %v, want the redirect refused, naming it, without the token", err)
	}
	if n := seen.Load(); n > 0 {
		t.Errorf("the other server got %d requests", n)
	}
}

// TestAccessRefused: settings that cannot make a client are errors
// (ErrAccess) naming the flag or the file and key, never a secret: the
// flags and the http_config file setting the same thing, a header the
// client sets itself, a file missing, a key Prometheus does not know.
func TestAccessRefused(t *testing.T) {
	dir := t.TempDir()
	tok := writeFile(t, dir, "token", token)
	pass := writeFile(t, dir, "password", password)
	ca := writeFile(t, dir, "ca.pem", "not used")
	cfg := func(name, yaml string) string { return writeFile(t, dir, name, yaml) }
	withAuth := cfg("auth.yml", "basic_auth: {username: u, password_file: password}\n")
	withCA := cfg("ca.yml", "tls_config: {ca_file: ca.pem}\n")
	withHeader := cfg("header.yml", "http_headers: {X-Api-Key: {secrets: ["+apiKey+"]}}\n")
	for _, c := range []struct {
		access calibrate.Access
		want   string
	}{
		{calibrate.Access{BasicAuthUser: "u"}, "--basic-auth u needs --basic-auth-password-file FILE"},
		{calibrate.Access{BasicAuthPasswordFile: pass}, "--basic-auth-password-file needs --basic-auth USER"},
		{calibrate.Access{BearerTokenFile: tok, BasicAuthUser: "u", BasicAuthPasswordFile: pass}, "give --bearer-token-file or --basic-auth, not both"},
		{calibrate.Access{ConfigFile: withAuth, BearerTokenFile: tok}, "--bearer-token-file and --http-config " + withAuth + " (basic_auth) both set the credentials"},
		{calibrate.Access{ConfigFile: withCA, CAFile: ca}, "--ca-file and --http-config " + withCA + " (tls_config's CA) both set the CA"},
		{calibrate.Access{ConfigFile: withHeader, Headers: []string{"x-api-key: " + token}}, "--header X-Api-Key and --http-config " + withHeader + " (http_headers) both set the header"},
		{calibrate.Access{Headers: []string{"Authorization: Bearer " + token}}, "--header Authorization: Prometheus's client sets that header itself: give --bearer-token-file"},
		{calibrate.Access{Headers: []string{"X Api Key " + token}}, "--header wants 'Name: value'"},
		{calibrate.Access{BearerTokenFile: filepath.Join(dir, "missing")}, "--bearer-token-file " + filepath.Join(dir, "missing") + ": no such file"},
		{calibrate.Access{ConfigFile: cfg("nopass.yml", "basic_auth: {username: u, password_file: nope}\n")}, "basic_auth.password_file " + filepath.Join(dir, "nope") + ": no such file"},
		{calibrate.Access{ConfigFile: cfg("typo.yml", "bearer_tokn_file: token\n")}, "line 1: field bearer_tokn_file not found"},
		{calibrate.Access{ConfigFile: cfg("misplaced.yml", "tls_config:\n  insecure_skip_verify: "+token+"\n")}, "line 2: cannot unmarshal !!str (a value) into bool"},
		{calibrate.Access{ConfigFile: cfg("both.yml", "bearer_token: "+token+"\nbasic_auth: {username: u, password: "+password+"}\n")}, "at most one of basic_auth, oauth2, bearer_token & bearer_token_file"},
		{calibrate.Access{ConfigFile: dir}, "--http-config " + dir + ": is a directory"},
	} {
		_, err := c.access.HTTPConfig()
		if err == nil || !errors.Is(err, calibrate.ErrAccess) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: error %v, want ErrAccess saying %q", c.access, err, c.want)
			continue
		}
		for _, secret := range []string{token, password, apiKey} {
			if strings.Contains(err.Error(), secret) {
				t.Errorf("the error shows a secret: %v", err)
			}
		}
	}
}

// FuzzHTTPConfig: any http_config file and --header make a client's
// config or an ErrAccess error, never a panic, and the error never holds
// the header's value (marked here, so that a message's own words are not
// taken for it).
func FuzzHTTPConfig(f *testing.F) {
	f.Add("authorization: {credentials_file: token}\n", "X-Api-Key", "v")
	f.Add("basic_auth: {username: u, password: p}\ntls_config: {insecure_skip_verify: true}\n", "X-A", "")
	f.Add("http_headers: {X-A: {values: [a]}}\n", "x-a", "b")
	f.Add("tls_config: {insecure_skip_verify: x}\n", "Authorization", "Bearer")
	f.Add("- a\n", "", ":")
	f.Fuzz(func(t *testing.T, yaml, name, value string) {
		const mark = "Zq9-s3cr3t-"
		if strings.Contains(yaml+name, "Zq9") {
			return
		}
		dir := t.TempDir()
		file := writeFile(t, dir, "http.yml", yaml)
		writeFile(t, dir, "token", "t")
		_, err := calibrate.Access{ConfigFile: file, Headers: []string{name + ": " + mark + value}}.HTTPConfig()
		if err == nil {
			return
		}
		if !errors.Is(err, calibrate.ErrAccess) {
			t.Fatalf("not ErrAccess: %v", err)
		}
		if strings.Contains(err.Error(), mark) {
			t.Fatalf("the header's value is in the error: %v", err)
		}
	})
}
