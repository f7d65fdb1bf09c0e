package lab

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"
)

// Server is one of the lab's HTTP servers, on loopback. It speaks HTTP/1.1
// and HTTP/2 without TLS (h2c), so browsers, curl and Prometheus reach it
// as well as the lab's own clients. Make one with Listen; Close it.
//
// A server on 127.0.0.1 is still reachable from a web page in the user's
// browser, so every server the lab starts refuses what a page could send:
// a request whose Host is not the server's own address (127.0.0.1:PORT or
// localhost:PORT; another name means DNS rebinding), and a cross-origin
// request that changes state (a POST, PUT or DELETE whose Sec-Fetch-Site
// or Origin says another site sent it). It bounds what a client can cost:
// request headers (serverHeaderBytes), the time to read a request
// (serverReadTimeout), idle connections (a minute) and the connections
// open at once (serverConns; more wait to be accepted).
type Server struct {
	srv  *http.Server
	url  *url.URL
	done chan struct{}
}

// Limits of every server the lab starts. The lab's own requests carry a
// few hundred bytes of headers and are read at once; a scenario's load
// generator needs about one connection per thousand intents in flight.
const (
	serverHeaderBytes = 32 << 10
	serverReadTimeout = time.Minute
	serverConns       = 512
)

// Listen serves h on addr, which must be a loopback address ("127.0.0.1:0"
// picks a free port).
func Listen(addr string, h http.Handler) (*Server, error) {
	return listen(addr, h, serverConns)
}

func listen(addr string, h http.Handler, conns int) (*Server, error) {
	ln, err := listenLoopback(addr)
	if err != nil {
		return nil, err
	}
	self := ln.Addr().String()
	var p http.Protocols
	p.SetHTTP1(true)
	p.SetUnencryptedHTTP2(true)
	s := &Server{
		srv: &http.Server{
			Handler:           sameSite(h, self),
			Protocols:         &p,
			HTTP2:             &http.HTTP2Config{MaxConcurrentStreams: 1000, MaxDecoderHeaderTableSize: noHeaderTable},
			ReadHeaderTimeout: 10 * time.Second,
			ReadTimeout:       serverReadTimeout,
			IdleTimeout:       time.Minute,
			MaxHeaderBytes:    serverHeaderBytes,
			// Clients that give up reset their streams: that is the
			// experiment, not an error worth a line.
			ErrorLog: log.New(io.Discard, "", 0),
		},
		url:  &url.URL{Scheme: "http", Host: self},
		done: make(chan struct{}),
	}
	go func() {
		defer close(s.done)
		_ = s.srv.Serve(limitListener(ln, conns))
	}()
	return s, nil
}

// listenLoopback listens on addr, which must be a loopback address: every
// server the lab starts, HTTP or gRPC.
func listenLoopback(addr string) (net.Listener, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return nil, errors.New("lab: listen on a loopback address (127.0.0.1), not " + addr)
	}
	return net.Listen("tcp", addr)
}

// sameSite refuses requests a web page could have sent on the user's
// behalf: one addressed to another host name than the server's own
// (self, "127.0.0.1:PORT", or localhost with that port), and a
// cross-origin one that changes state (http.CrossOriginProtection).
func sameSite(h http.Handler, self string) http.Handler {
	_, port, _ := net.SplitHostPort(self)
	hosts := []string{self, net.JoinHostPort("localhost", port)}
	cross := http.NewCrossOriginProtection()
	cross.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "lab: cross-origin request refused: a web page may not change the lab's state", http.StatusForbidden)
	}))
	next := cross.Handler(h)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !slices.Contains(hosts, strings.ToLower(r.Host)) {
			http.Error(w, fmt.Sprintf("lab: this server answers at %s only, not at Host %q", self, r.Host), http.StatusMisdirectedRequest)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// limitListener accepts at most n connections at once: Accept waits for
// one to close before it takes another.
func limitListener(ln net.Listener, n int) net.Listener {
	return &limited{Listener: ln, slots: make(chan struct{}, n), closed: make(chan struct{})}
}

type limited struct {
	net.Listener
	slots     chan struct{}
	closed    chan struct{}
	closeOnce sync.Once
}

func (l *limited) Accept() (net.Conn, error) {
	select {
	case l.slots <- struct{}{}:
	case <-l.closed:
		return nil, net.ErrClosed
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.slots
		return nil, err
	}
	return &slotConn{Conn: c, free: func() { <-l.slots }}, nil
}

func (l *limited) Close() error {
	l.closeOnce.Do(func() { close(l.closed) })
	return l.Listener.Close()
}

// slotConn frees its slot once, when it is closed.
type slotConn struct {
	net.Conn
	once sync.Once
	free func()
}

func (c *slotConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.free)
	return err
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
