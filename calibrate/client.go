package calibrate

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/prometheus/common/config"

	"github.com/retrystorm/retrystorm/internal/safetext"
)

// client is a's HTTP client: Prometheus's own (config.NewClientFromConfig),
// with answers bounded (limited), a refusal of the credentials named
// (refusedError), a timeout on each request, and a redirect followed only
// on the server given (sameHost; none when the http_config file says
// follow_redirects: false).
func (a Access) client(timeout time.Duration) (*http.Client, error) {
	cfg, err := a.HTTPConfig()
	if err != nil {
		return nil, err
	}
	c, err := config.NewClientFromConfig(*cfg, "retrystorm")
	if err != nil {
		// Its errors name files (a CA that is not PEM), never their
		// contents.
		return nil, accessf("%s", scrub(err))
	}
	c.Transport = limited{c.Transport}
	c.Timeout = timeout
	c.CheckRedirect = sameHost
	if !cfg.FollowRedirects {
		c.CheckRedirect = func(r *http.Request, via []*http.Request) error {
			return fmt.Errorf("%s redirected to %s, and --http-config says follow_redirects: false", via[0].URL.Redacted(), r.URL.Redacted())
		}
	}
	return c, nil
}

// describe says in words what a sends, naming files and header names,
// never a secret: "with the bearer token of /run/secrets/prom-token"; any
// says whether it sends credentials at all.
func (a Access) describe() (text string, any bool) {
	var what []string
	switch {
	case a.BearerTokenFile != "":
		what = append(what, "the bearer token of "+safetext.Name(a.BearerTokenFile))
	case a.BasicAuthUser != "":
		what = append(what, fmt.Sprintf("basic auth as %s (the password of %s)", safetext.Name(a.BasicAuthUser), safetext.Name(a.BasicAuthPasswordFile)))
	}
	if a.ConfigFile != "" {
		if cfg, err := a.HTTPConfig(); err == nil && credentials(cfg) != "" && len(what) == 0 {
			what = append(what, fmt.Sprintf("the %s of --http-config %s", credentials(cfg), safetext.Name(a.ConfigFile)))
		}
	}
	if len(a.Headers) > 0 {
		var names []string
		for _, h := range a.Headers {
			if n, _, err := parseHeader(h); err == nil {
				names = append(names, n)
			}
		}
		what = append(what, "the header "+strings.Join(names, ", "))
	}
	if len(what) == 0 {
		return "with no credentials", false
	}
	return "with " + strings.Join(what, " and "), true
}

// refusedError is an answer that refuses the request's credentials (401,
// 407, or 403 to a GET: client_golang sends a POST again as a GET on a
// 403, which some proxies give for the method).
type refusedError struct{ status string }

func (e *refusedError) Error() string { return "refused: " + e.status }

// refusal returns the refusedError of res, if it is one.
func refusal(r *http.Request, res *http.Response) error {
	switch {
	case res.StatusCode == http.StatusUnauthorized, res.StatusCode == http.StatusProxyAuthRequired,
		res.StatusCode == http.StatusForbidden && r.Method != http.MethodPost:
		return &refusedError{res.Status}
	}
	return nil
}

// readError is err, from a request to l's server, in words: a refusal of
// the credentials names what was sent (files, never secrets), a
// certificate not trusted says how to trust it.
func (l Live) readError(err error) error {
	where := redact(l.URL)
	var re *refusedError
	var unknownCA x509.UnknownAuthorityError
	var verify *tls.CertificateVerificationError
	switch {
	case errors.As(err, &re):
		sent, any := l.Access.describe()
		advice := "check them (a token expired or rotated, the wrong user or file)"
		switch {
		case strings.HasPrefix(re.status, "407"):
			advice = "the proxy between asks for credentials of its own: proxy_url and its settings in --http-config"
		case strings.HasPrefix(re.status, "403"):
			advice = "it knows the credentials but does not let them read the API"
		case !any:
			advice = "give the credentials it takes: --bearer-token-file, --basic-auth with --basic-auth-password-file, --header or --http-config"
		}
		return fmt.Errorf("Prometheus at %s refused the request (%s) sent %s: %s", where, re.status, sent, advice)
	case errors.As(err, &unknownCA) || errors.As(err, &verify) && errors.As(verify.Err, &unknownCA):
		return fmt.Errorf("cannot read from Prometheus at %s: its certificate is signed by a CA this machine does not trust: give --ca-file FILE, that CA's certificate (PEM)", where)
	}
	return fmt.Errorf("cannot read from Prometheus at %s: %v", where, err)
}

// redact is the URL u with any password it holds replaced (url.URL's
// Redacted), for messages and written files.
func redact(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return "the --prometheus URL"
	}
	return p.Redacted()
}
