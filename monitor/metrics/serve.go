package metrics

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/npumon/npumon/internal/crash"
)

// Registry returns a registry holding only c: a scrape reads the Stores
// and nothing else. Targets whose series would collide are refused
// (Distinct).
func Registry(c *Collector) (*prometheus.Registry, error) {
	if err := Distinct(c.targets); err != nil {
		return nil, err
	}
	reg := prometheus.NewRegistry()
	if err := reg.Register(c); err != nil {
		return nil, err
	}
	return reg, nil
}

// ListenAddr resolves a --metrics address: host:port, or :port for the
// loopback address. It reports whether the address is reachable from other
// hosts (not a loopback address), which the caller must say out loud.
func ListenAddr(s string) (addr string, exposed bool, err error) {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return "", false, fmt.Errorf("%q: want host:port or :port (%v)", s, err)
	}
	if port == "" {
		return "", false, fmt.Errorf("%q: no port", s)
	}
	if host == "" {
		return net.JoinHostPort("127.0.0.1", port), false, nil
	}
	if host == "localhost" {
		return net.JoinHostPort(host, port), false, nil
	}
	ip := net.ParseIP(host)
	return net.JoinHostPort(host, port), ip == nil || !ip.IsLoopback(), nil
}

// The /metrics server's limits (docs/metrics.md, Limits). They are its
// own: the wire listener in the same process has separate ones.
const (
	// MaxConns caps the connections held; at the cap the longest idle
	// one is closed to make room.
	MaxConns = 64
	// MaxInFlight caps scrapes served at once; one more gets a 503.
	MaxInFlight = 4
	// IdleTimeout closes a keep-alive connection with no request.
	IdleTimeout = 30 * time.Second
	// ReadTimeout bounds reading a request (headers: ReadHeaderTimeout).
	ReadTimeout = 10 * time.Second
	// WriteTimeout bounds a response, so a client that never reads is
	// dropped (the scrape itself times out at 10 s).
	WriteTimeout = 15 * time.Second
)

// Server serves /metrics for a Collector.
type Server struct {
	srv *http.Server
	ln  *limitListener
	err chan error
}

// Serve listens on addr (already resolved by ListenAddr) and serves c's
// metrics at /metrics in the Prometheus text or OpenMetrics format.
func Serve(addr string, c *Collector) (*Server, error) {
	reg, err := Registry(c)
	if err != nil {
		return nil, err
	}
	tl, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	ln := newLimitListener(tl, MaxConns)
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		ErrorHandling:       promhttp.ContinueOnError,
		EnableOpenMetrics:   true,
		Timeout:             10 * time.Second,
		MaxRequestsInFlight: MaxInFlight,
	}))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		fmt.Fprintln(w, "npumon: metrics at /metrics")
	})
	s := &Server{srv: &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: ReadTimeout,
		WriteTimeout: WriteTimeout, IdleTimeout: IdleTimeout, MaxHeaderBytes: 64 << 10, ConnState: ln.connState},
		ln: ln, err: make(chan error, 1)}
	go func() {
		defer crash.Recover()
		err := s.srv.Serve(ln)
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
		s.err <- err
	}()
	return s, nil
}

// Addr is the address the server listens on.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// Close stops the server.
func (s *Server) Close() error {
	err := s.srv.Close()
	if serr := <-s.err; err == nil {
		err = serr
	}
	return err
}
