// Command gate-agent is the gate's native sidecar in a sandbox pod: it keeps the pod's policy
// bundle compiled and decides the pod's tool calls for gate-client, which the PreToolUse
// wrapper runs, on a Unix socket (internal/gateagent). It writes one JSON record per decision
// on stdout and logs on stderr; it never logs a call's input.
//
// The socket's directory is the sidecar's: it is mounted writable only here and read-only in
// the agent's containers, so the agent can connect to the socket but not replace it or plant
// another. The socket itself is made connectable by every user (0666), since the agent's
// containers run as users other than the sidecar's.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/intutic/gate-operator/internal/decisionlog"
	"github.com/intutic/gate-operator/internal/gateagent"
)

// options are gate-agent's flags.
type options struct {
	bundleDir, socket, fallbackSpool, healthAddr, metricsAddr string
	recordAllowRate                                           float64
	recordAllowBurst                                          int
	// confirmerURL and confirmerToken are the human lane's (both or neither).
	confirmerURL, confirmerToken string
}

func main() {
	log := logr.FromSlogHandler(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{}))
	var o options
	flags := flag.NewFlagSet("gate-agent", flag.ContinueOnError)
	flags.StringVar(&o.bundleDir, "bundle-dir", "/opt/intutic/hooks", "the policy bundle's volume, mounted as in the agent's containers (the same pod volume)")
	flags.StringVar(&o.socket, "socket", "/run/gate-agent/gate.sock", "the Unix socket gate-client connects to; its directory must be this container's alone")
	flags.StringVar(&o.fallbackSpool, "fallback-spool", "/run/gate-fallback/fallback.ndjson", "the file gate-hook appends the calls it decided without the sidecar to; empty for none")
	flags.StringVar(&o.healthAddr, "health-bind-address", ":18082", "address of /readyz and /healthz; empty for none")
	flags.StringVar(&o.metricsAddr, "metrics-bind-address", ":18081", "address of /metrics; empty for none")
	flags.Float64Var(&o.recordAllowRate, "record-allow-rate", decisionlog.DefaultAllowRate, "Allow decision records written per second at most; past it they are dropped and counted, every other record is kept")
	flags.IntVar(&o.recordAllowBurst, "record-allow-burst", decisionlog.DefaultAllowBurst, "Allow decision records written in a burst above --record-allow-rate")
	flags.StringVar(&o.confirmerURL, "confirmer-url", "", "the gate API of the SessionConfirmer that holds this pod's Ask verdicts for a human (the policy's spec.gateAgent.humanApproval); empty for no human lane")
	flags.StringVar(&o.confirmerToken, "confirmer-token", "", "the projected ServiceAccount token with that confirmer's audience, mounted into this container only")
	if err := flags.Parse(os.Args[1:]); err != nil {
		os.Exit(2)
	}
	if (o.confirmerURL == "") != (o.confirmerToken == "") {
		fmt.Fprintln(os.Stderr, "gate-agent: --confirmer-url and --confirmer-token go together")
		os.Exit(2)
	}
	if err := run(o, log); err != nil {
		log.Error(err, "gate-agent stopped")
		os.Exit(1)
	}
}

// shutdownGrace bounds the HTTP servers' shutdown; the socket's connections end by their own
// deadlines.
const shutdownGrace = 5 * time.Second

func run(o options, log logr.Logger) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	// The spool's offset is kept beside the socket: that directory is this container's alone
	// and outlives it, so a restarted sidecar does not report the same fallbacks again.
	var lane *gateagent.HumanLane
	if o.confirmerURL != "" {
		lane = &gateagent.HumanLane{URL: o.confirmerURL, TokenFile: o.confirmerToken}
	}
	srv, err := gateagent.New(gateagent.Options{BundleDir: o.bundleDir, FallbackSpool: o.fallbackSpool, HumanLane: lane,
		SpoolState: filepath.Join(filepath.Dir(o.socket), "fallback.offset"), Records: os.Stdout, Log: log, Registerer: reg,
		RecordOptions: decisionlog.WriterOptions{AllowRate: o.recordAllowRate, AllowBurst: o.recordAllowBurst}})
	if err != nil {
		return err
	}
	ln, err := listen(o.socket)
	if err != nil {
		return err
	}

	var servers []*http.Server
	if o.healthAddr != "" {
		mux := http.NewServeMux()
		mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
		mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
			if !srv.Ready() {
				http.Error(w, "the policy bundle is not loaded yet", http.StatusServiceUnavailable)
				return
			}
			_, _ = w.Write([]byte("ok\n"))
		})
		servers = append(servers, newHTTPServer(o.healthAddr, mux))
	}
	if o.metricsAddr != "" {
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
		servers = append(servers, newHTTPServer(o.metricsAddr, mux))
	}
	errc := make(chan error, len(servers))
	for _, s := range servers {
		go func() {
			if err := s.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
				errc <- fmt.Errorf("serving %s: %w", s.Addr, err)
			}
		}()
	}

	log.Info("gate-agent serving", "bundleDir", o.bundleDir, "socket", o.socket, "fallbackSpool", o.fallbackSpool, "health", o.healthAddr, "metrics", o.metricsAddr,
		"humanLane", o.confirmerURL)
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- srv.Run(runCtx, ln) }()
	select {
	case err = <-errc:
		cancel()
		err = errors.Join(err, <-done)
	case err = <-done:
	}
	log.Info("gate-agent stopping: in-flight calls are finished")
	sctx, scancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer scancel()
	for _, s := range servers {
		err = errors.Join(err, s.Shutdown(sctx))
	}
	return err
}

// listen makes the socket at path: a stale one left by an earlier run is removed first (any
// other file there is an error, never removed), and the new one is made connectable by the
// agent's users.
func listen(path string) (net.Listener, error) {
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode().Type() != fs.ModeSocket {
			return nil, fmt.Errorf("%s exists and is not a socket", path)
		}
		if err := os.Remove(path); err != nil {
			return nil, err
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(path, 0o666); err != nil {
		_ = ln.Close()
		return nil, err
	}
	return ln, nil
}

// newHTTPServer bounds slow and idle clients of the health and metrics endpoints.
func newHTTPServer(addr string, h http.Handler) *http.Server {
	return &http.Server{Addr: addr, Handler: h, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second, WriteTimeout: 30 * time.Second, IdleTimeout: 60 * time.Second}
}
