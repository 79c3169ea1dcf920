// Command testbed is the one static binary of the local node's test images (hack/images
// -test-images): the pod sandbox's pause process, a DNS stand-in, a TCP probe, the fake
// Managed Agents API and the Messages API stand-in, each as a subcommand. None of it ships to
// users.
//
//	testbed pause                        sleep until SIGTERM or SIGINT (the pause image)
//	testbed dns -listen :5353 NAME=IP... answer A queries for NAME with IP, NXDOMAIN otherwise
//	testbed probe -timeout 2s HOST:PORT... try each TCP connect, print "HOST:PORT open|blocked"
//	testbed window                       at container start, probe the Kubernetes API Service until
//	                                     it is blocked and print how long it was open, then pause
//	testbed listen PORT...               accept TCP connections on each port and close them (the
//	                                     "outside" hosts of the local node)
//	testbed fake-anthropic -listen :8080 -api-key-file F
//	                                     the fake Managed Agents API over plain HTTP, with
//	                                     /_fake/ endpoints to add sessions and read confirmations
//	testbed messages -listen :8080       the scripted Messages API stand-in Claude Code talks to,
//	                                     with /_standin/ endpoints to script it and read results
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/miekg/dns"

	"github.com/intutic/gate-operator/internal/anthropic/anthropictest"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: testbed pause|dns|probe|window|listen|fake-anthropic|messages [flags]")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	var err error
	switch cmd, args := os.Args[1], os.Args[2:]; cmd {
	case "pause":
		<-ctx.Done()
	case "dns":
		err = serveDNS(ctx, args)
	case "probe":
		err = probe(args)
	case "listen":
		err = listen(ctx, args)
	case "window":
		window()
		<-ctx.Done()
	case "fake-anthropic":
		err = fakeAnthropic(ctx, args)
	case "messages":
		err = messages(ctx, args)
	default:
		err = fmt.Errorf("unknown subcommand %q", cmd)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "testbed:", err)
		os.Exit(1)
	}
}

// serveDNS answers A queries from the NAME=IP arguments on UDP and TCP.
func serveDNS(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("dns", flag.ContinueOnError)
	listen := fs.String("listen", ":5353", "address to serve DNS on, UDP and TCP")
	if err := fs.Parse(args); err != nil {
		return err
	}
	records := map[string]net.IP{}
	for _, a := range fs.Args() {
		name, ip, ok := strings.Cut(a, "=")
		if !ok || net.ParseIP(ip).To4() == nil {
			return fmt.Errorf("record %q: want NAME=IPv4", a)
		}
		records[dns.Fqdn(strings.ToLower(name))] = net.ParseIP(ip).To4()
	}
	handler := dns.HandlerFunc(func(w dns.ResponseWriter, req *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(req)
		m.Authoritative = true
		if len(req.Question) == 1 {
			q := req.Question[0]
			ip, ok := records[strings.ToLower(q.Name)]
			switch {
			case !ok:
				m.Rcode = dns.RcodeNameError
			case q.Qtype == dns.TypeA:
				m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 30}, A: ip})
			}
		}
		_ = w.WriteMsg(m)
	})
	servers := []*dns.Server{{Addr: *listen, Net: "udp", Handler: handler}, {Addr: *listen, Net: "tcp", Handler: handler}}
	errs := make(chan error, len(servers))
	for _, s := range servers {
		go func() { errs <- s.ListenAndServe() }()
	}
	fmt.Printf("dns: serving %d records on %s\n", len(records), *listen)
	select {
	case <-ctx.Done():
	case err := <-errs:
		return err
	}
	for _, s := range servers {
		_ = s.Shutdown()
	}
	return nil
}

// probe tries a TCP connection to each HOST:PORT and prints one line per destination: open
// when the connection is made, blocked otherwise. Every destination the tests probe has a
// listener, and enforcers reject as well as drop (kube-router answers with ICMP port
// unreachable, which a TCP client sees as "connection refused"), so only a made connection
// counts as open.
func probe(args []string) error {
	fs := flag.NewFlagSet("probe", flag.ContinueOnError)
	timeout := fs.Duration("timeout", 2*time.Second, "time limit of each connect")
	if err := fs.Parse(args); err != nil {
		return err
	}
	for _, dst := range fs.Args() {
		conn, err := net.DialTimeout("tcp", dst, *timeout)
		if err != nil {
			fmt.Printf("%s blocked\n", dst)
			continue
		}
		_ = conn.Close()
		fmt.Printf("%s open\n", dst)
	}
	return nil
}

// window measures the ungoverned first moments of a container: it probes the Kubernetes API
// Service (which a sandbox's egress policy denies) from its first instant until two probes in
// a row fail, and prints whether the first probe got through and for how long it stayed open.
func window() {
	canary := net.JoinHostPort(os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT"))
	start := time.Now()
	first, lastOpen, fails := "", time.Duration(0), 0
	for time.Since(start) < 60*time.Second && fails < 2 {
		conn, err := net.DialTimeout("tcp", canary, 300*time.Millisecond)
		state := "blocked"
		if err == nil {
			conn.Close()
			state, lastOpen, fails = "open", time.Since(start), 0
		} else {
			fails++
		}
		if first == "" {
			first = state
		}
		time.Sleep(20 * time.Millisecond)
	}
	fmt.Printf("window: canary=%s first=%s open_for_ms=%d\n", canary, first, lastOpen.Milliseconds())
}

// listen accepts connections on every port given and closes each at once.
func listen(ctx context.Context, ports []string) error {
	if len(ports) == 0 {
		return errors.New("listen: no ports")
	}
	errs := make(chan error, len(ports))
	for _, p := range ports {
		l, err := net.Listen("tcp", ":"+p)
		if err != nil {
			return err
		}
		go func() { <-ctx.Done(); _ = l.Close() }()
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					errs <- err
					return
				}
				_ = c.Close()
			}
		}()
	}
	fmt.Printf("listening on %v\n", ports)
	select {
	case <-ctx.Done():
		return nil
	case err := <-errs:
		return err
	}
}

// fakeAnthropic serves the fake Managed Agents API over plain HTTP inside the cluster. The
// /_fake/ endpoints script it: POST /_fake/sessions/{id} with {"agentID": ..., "calls": [...]}
// adds a session (or calls to an existing one), GET /_fake/sessions/{id}/confirmations lists
// the confirmations the session received, POST /_fake/agents with an anthropictest.Agent adds
// an agent (or replaces it).
func fakeAnthropic(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("fake-anthropic", flag.ContinueOnError)
	listen := fs.String("listen", ":8080", "address to serve on")
	keyFile := fs.String("api-key-file", "", "file holding the API key the fake accepts")
	if err := fs.Parse(args); err != nil {
		return err
	}
	key, err := os.ReadFile(*keyFile)
	if err != nil {
		return err
	}
	fake := anthropictest.New(strings.TrimSpace(string(key)))
	defer fake.Close()
	var mu sync.Mutex
	known := map[string]bool{}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /_fake/sessions/{id}", func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			AgentID string
			Calls   []anthropictest.ToolUse
		}
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		id := r.PathValue("id")
		var ids []string
		mu.Lock()
		if known[id] {
			ids = fake.AddCalls(id, body.Calls...)
		} else {
			known[id] = true
			ids = fake.AddSession(id, body.AgentID, body.Calls...)
		}
		mu.Unlock()
		_ = json.NewEncoder(w).Encode(map[string]any{"toolUseIDs": ids})
	})
	mux.HandleFunc("GET /_fake/sessions/{id}/confirmations", func(w http.ResponseWriter, r *http.Request) {
		id := r.PathValue("id")
		mu.Lock()
		ok := known[id]
		mu.Unlock()
		if !ok {
			http.NotFound(w, r)
			return
		}
		_ = json.NewEncoder(w).Encode(fake.Confirmations(id))
	})
	mux.HandleFunc("POST /_fake/agents", func(w http.ResponseWriter, r *http.Request) {
		var agent anthropictest.Agent
		if err := json.NewDecoder(r.Body).Decode(&agent); err != nil || agent.ID == "" {
			http.Error(w, fmt.Sprintf("want an agent with an ID: %v", err), http.StatusBadRequest)
			return
		}
		fake.AddAgent(agent)
		_ = json.NewEncoder(w).Encode(map[string]any{})
	})
	mux.Handle("/", fake.Config.Handler)
	return serveHTTP(ctx, *listen, mux, "fake Managed Agents API")
}

// serveHTTP serves handler on addr until ctx ends.
func serveHTTP(ctx context.Context, addr string, handler http.Handler, what string) error {
	srv := &http.Server{Addr: addr, Handler: handler, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		_ = srv.Shutdown(context.Background())
	}()
	fmt.Printf("%s on %s\n", what, addr)
	if err := srv.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
