package calibrate

import (
	"errors"
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/prometheus/common/config"
	"go.yaml.in/yaml/v3"

	"github.com/retrystorm/retrystorm/internal/boundedfile"
	"github.com/retrystorm/retrystorm/internal/safetext"
)

// Access is how calibrate reaches a Prometheus server that asks for
// credentials, as people run one behind a proxy or with its own web
// config: Prometheus's own http_config settings (a bearer token file,
// basic auth with a password file, extra headers, a CA to trust), given
// as flags or as an http_config file, and applied by
// prometheus/common/config, the code Prometheus reaches its targets with.
// The zero Access sends no credentials and trusts the system's CAs.
//
// An Access holds no secret but the values of Headers: the credentials
// are in files it names (or in the http_config file). No message, JSON or
// written file says a secret: a refusal names the file it came from.
type Access struct {
	// ConfigFile is an http_config file (--http-config), YAML in
	// Prometheus's format, read strictly; the files it names are relative
	// to its directory, as in Prometheus.
	ConfigFile string
	// BearerTokenFile (--bearer-token-file) holds a token sent as
	// "Authorization: Bearer".
	BearerTokenFile string
	// BasicAuthUser and BasicAuthPasswordFile are --basic-auth and
	// --basic-auth-password-file: both or neither.
	BasicAuthUser, BasicAuthPasswordFile string
	// Headers are --header, each "Name: value"; a value is sent as a
	// secret (never printed nor written).
	Headers []string
	// CAFile (--ca-file) is the PEM CA that signed the server's
	// certificate, trusted besides the system's.
	CAFile string
}

// maxHTTPConfig bounds an http_config file: a page of YAML.
const maxHTTPConfig = 1 << 20

// ErrAccess is wrapped by every error of Access.HTTPConfig: the settings
// cannot make a client (a usage error).
var ErrAccess = errors.New("access")

func accessf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrAccess, fmt.Sprintf(format, args...))
}

// Given reports whether a sets anything: otherwise the client is
// Prometheus's default one.
func (a Access) Given() bool {
	return a.ConfigFile != "" || a.BearerTokenFile != "" || a.BasicAuthUser != "" ||
		a.BasicAuthPasswordFile != "" || len(a.Headers) > 0 || a.CAFile != ""
}

// HTTPConfig returns a as Prometheus's HTTPClientConfig: the
// http_config file's, if any, with the flags' settings added, validated
// as Prometheus validates it. A flag may not set what the file sets
// (credentials, the CA, a header of the same name): the error names both.
// Every file named must be a regular file that can be read; their
// contents are read when a request is sent, as Prometheus does (a token
// rotated on disk is picked up).
func (a Access) HTTPConfig() (*config.HTTPClientConfig, error) {
	cfg := config.DefaultHTTPClientConfig
	proxySet := false
	if a.ConfigFile != "" {
		c, set, err := loadHTTPConfig(a.ConfigFile)
		if err != nil {
			return nil, err
		}
		cfg, proxySet = *c, set
	}
	if err := a.addFlags(&cfg); err != nil {
		return nil, err
	}
	if !proxySet {
		// As the client calibrate used before it (client_golang's
		// DefaultRoundTripper): HTTPS_PROXY and NO_PROXY apply unless
		// the http_config file says its own proxy.
		cfg.ProxyFromEnvironment = true
	}
	if err := cfg.Validate(); err != nil {
		return nil, accessf("%s", scrub(err))
	}
	if err := checkFiles(&cfg, a); err != nil {
		return nil, err
	}
	return &cfg, nil
}

// loadHTTPConfig reads an http_config file as Prometheus does
// (config.LoadHTTPConfig: strict, relative files from its directory),
// with a bound on its size, and reports whether it sets a proxy.
func loadHTTPConfig(file string) (*config.HTTPClientConfig, bool, error) {
	data, err := boundedfile.Read(file, maxHTTPConfig)
	if err != nil {
		return nil, false, accessf("--http-config %s: %v", safetext.Name(file), err)
	}
	c, err := config.LoadHTTPConfig(string(data))
	if err != nil {
		return nil, false, accessf("--http-config %s: %s (Prometheus's http_config format: basic_auth, authorization, bearer_token_file, tls_config, http_headers, proxy_url...)", safetext.Name(file), scrub(err))
	}
	c.SetDirectory(filepath.Dir(file))
	var keys map[string]any
	_ = yaml.Unmarshal(data, &keys) // LoadHTTPConfig read it: it is YAML
	_, url := keys["proxy_url"]
	_, env := keys["proxy_from_environment"]
	return c, url || env, nil
}

// addFlags adds the flags' settings to cfg (the file's, or the default),
// refusing one the file sets too.
func (a Access) addFlags(cfg *config.HTTPClientConfig) error {
	from := "--http-config " + safetext.Name(a.ConfigFile)
	creds := credentials(cfg)
	switch {
	case a.BasicAuthUser != "" && a.BasicAuthPasswordFile == "":
		return accessf("--basic-auth %s needs --basic-auth-password-file FILE, the file holding the password", safetext.Escape(a.BasicAuthUser))
	case a.BasicAuthPasswordFile != "" && a.BasicAuthUser == "":
		return accessf("--basic-auth-password-file needs --basic-auth USER, the user name")
	case a.BearerTokenFile != "" && a.BasicAuthUser != "":
		return accessf("give --bearer-token-file or --basic-auth, not both: a request carries one Authorization header")
	case a.BearerTokenFile != "" && creds != "":
		return accessf("--bearer-token-file and %s (%s) both set the credentials: give them in one place", from, creds)
	case a.BasicAuthUser != "" && creds != "":
		return accessf("--basic-auth and %s (%s) both set the credentials: give them in one place", from, creds)
	case a.CAFile != "" && (cfg.TLSConfig.CA != "" || cfg.TLSConfig.CAFile != "" || cfg.TLSConfig.CARef != ""):
		return accessf("--ca-file and %s (tls_config's CA) both set the CA: give it in one place", from)
	}
	if a.BearerTokenFile != "" {
		cfg.Authorization = &config.Authorization{Type: "Bearer", CredentialsFile: a.BearerTokenFile}
	}
	if a.BasicAuthUser != "" {
		cfg.BasicAuth = &config.BasicAuth{Username: a.BasicAuthUser, PasswordFile: a.BasicAuthPasswordFile}
	}
	if a.CAFile != "" {
		cfg.TLSConfig.CAFile = a.CAFile
	}
	for _, h := range a.Headers {
		name, value, err := parseHeader(h)
		if err != nil {
			return err
		}
		if cfg.HTTPHeaders == nil {
			cfg.HTTPHeaders = &config.Headers{Headers: map[string]config.Header{}}
		}
		for n := range cfg.HTTPHeaders.Headers {
			if http.CanonicalHeaderKey(n) == name && a.ConfigFile != "" {
				return accessf("--header %s and %s (http_headers) both set the header: give it in one place", name, from)
			}
		}
		hd := cfg.HTTPHeaders.Headers[name]
		hd.Secrets = append(hd.Secrets, config.Secret(value))
		cfg.HTTPHeaders.Headers[name] = hd
	}
	return nil
}

// credentials names what cfg authenticates with, or "".
func credentials(cfg *config.HTTPClientConfig) string {
	switch {
	case cfg.BasicAuth != nil:
		return "basic_auth"
	case cfg.OAuth2 != nil:
		return "oauth2"
	case cfg.Authorization != nil:
		return "authorization"
	case cfg.BearerToken != "" || cfg.BearerTokenFile != "":
		return "bearer_token"
	}
	return ""
}

// headerName is an HTTP field name (RFC 9110's token).
var headerName = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")

// parseHeader reads --header's "Name: value", the name canonical. Its
// errors quote the name, never the value.
func parseHeader(h string) (name, value string, err error) {
	n, v, ok := strings.Cut(h, ":")
	n = strings.TrimSpace(n)
	if !ok || !headerName.MatchString(n) {
		return "", "", accessf("--header wants 'Name: value' (a field name such as X-Scope-OrgID, a colon, the value)")
	}
	name = http.CanonicalHeaderKey(n)
	if _, reserved := config.ReservedHeaders[name]; reserved {
		hint := ""
		if name == "Authorization" {
			hint = ": give --bearer-token-file or --basic-auth"
		}
		return "", "", accessf("--header %s: Prometheus's client sets that header itself%s", name, hint)
	}
	return name, strings.TrimSpace(v), nil
}

// checkFiles makes sure each file cfg names can be read, before anything
// is sent: a missing token file is a usage error naming the flag, not a
// failed request.
func checkFiles(cfg *config.HTTPClientConfig, a Access) error {
	type named struct{ what, file string }
	var files []named
	add := func(what, file string) {
		if file != "" {
			files = append(files, named{what, file})
		}
	}
	if c := cfg.Authorization; c != nil {
		add("authorization.credentials_file", c.CredentialsFile)
	}
	if b := cfg.BasicAuth; b != nil {
		add("basic_auth.username_file", b.UsernameFile)
		add("basic_auth.password_file", b.PasswordFile)
	}
	t := cfg.TLSConfig
	add("tls_config.ca_file", t.CAFile)
	add("tls_config.cert_file", t.CertFile)
	add("tls_config.key_file", t.KeyFile)
	if cfg.HTTPHeaders != nil {
		for _, n := range slices.Sorted(maps.Keys(cfg.HTTPHeaders.Headers)) {
			for _, f := range cfg.HTTPHeaders.Headers[n].Files {
				add("http_headers."+n+".files", f)
			}
		}
	}
	for _, f := range files {
		st, err := os.Stat(f.file)
		if err == nil && !st.Mode().IsRegular() {
			err = errors.New("not a regular file")
		}
		if err != nil {
			return accessf("%s: %v", a.flagOf(f.what, f.file), reason(err))
		}
	}
	return nil
}

// flagOf says where the file of setting what was given: its flag, or the
// http_config file's key.
func (a Access) flagOf(what, file string) string {
	for _, f := range []struct{ flag, file string }{
		{"--bearer-token-file", a.BearerTokenFile}, {"--basic-auth-password-file", a.BasicAuthPasswordFile}, {"--ca-file", a.CAFile},
	} {
		if f.file == file {
			return f.flag + " " + safetext.Name(file)
		}
	}
	return fmt.Sprintf("--http-config %s: %s %s", safetext.Name(a.ConfigFile), what, safetext.Name(file))
}

// reason is err without the path it names (the caller names it).
func reason(err error) string {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

// quoted matches what the YAML reader quotes of the input in its errors
// ("cannot unmarshal !!str `...` into bool"): a secret written under the
// wrong key must not be printed back.
var quoted = regexp.MustCompile("`[^`]*`")

// scrub is err's text with any value it quotes from the input left out.
func scrub(err error) string {
	msg := strings.Join(strings.Fields(err.Error()), " ")
	msg = strings.TrimPrefix(msg, "yaml: unmarshal errors: ")
	return safetext.Escape(quoted.ReplaceAllString(msg, "(a value)"))
}
