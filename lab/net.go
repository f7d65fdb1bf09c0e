package lab

import (
	"context"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/url"
	"time"
)

// Server is one of the lab's HTTP servers, on loopback. It speaks HTTP/1.1
// and HTTP/2 without TLS (h2c), so browsers, curl and Prometheus reach it
// as well as the lab's own clients. Make one with Listen; Close it.
type Server struct {
	srv  *http.Server
	url  *url.URL
	done chan struct{}
}

// Listen serves h on addr, which must be a loopback address ("127.0.0.1:0"
// picks a free port).
func Listen(addr string, h http.Handler) (*Server, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return nil, errors.New("lab: listen on a loopback address (127.0.0.1), not " + addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	var p http.Protocols
	p.SetHTTP1(true)
	p.SetUnencryptedHTTP2(true)
	s := &Server{
		srv: &http.Server{
			Handler:           h,
			Protocols:         &p,
			HTTP2:             &http.HTTP2Config{MaxConcurrentStreams: 1000, MaxDecoderHeaderTableSize: noHeaderTable},
			ReadHeaderTimeout: 10 * time.Second,
			IdleTimeout:       time.Minute,
			// Clients that give up reset their streams: that is the
			// experiment, not an error worth a line.
			ErrorLog: log.New(io.Discard, "", 0),
		},
		url:  &url.URL{Scheme: "http", Host: ln.Addr().String()},
		done: make(chan struct{}),
	}
	go func() {
		defer close(s.done)
		_ = s.srv.Serve(ln)
	}()
	return s, nil
}

// URL returns the server's base URL, such as http://127.0.0.1:41234.
func (s *Server) URL() *url.URL { u := *s.url; return &u }

// Close stops the server: it lets the requests in progress finish for a
// moment (closeGrace), then closes every connection, and waits for it to
// stop. The lab closes a server once its work is done, but a client's
// HTTP/2 connection may linger a few milliseconds after its last request
// was cancelled, and an HTTP/2 server waits a whole second for it.
func (s *Server) Close() { s.CloseWithin(closeGrace) }

// closeGrace is how long Close lets requests in progress finish.
const closeGrace = 100 * time.Millisecond

// CloseWithin is Close with another time limit.
func (s *Server) CloseWithin(d time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	if err := s.srv.Shutdown(ctx); err != nil {
		_ = s.srv.Close()
	}
	<-s.done
}

// healthPath answers 200 at once on the origin and the gateway, outside
// the experiment: the lab opens its connections with it.
const healthPath = "/healthz"

func serveHealth(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }

// warm opens the gateway's connection to the origin before the first tick
// (the load generator opens its own to the gateway).
func warm(ctx context.Context, g *Gateway) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return g.warm(ctx)
}
