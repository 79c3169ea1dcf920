package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/intutic/gate-operator/internal/anthropic/anthropictest"
	"github.com/intutic/gate-operator/internal/apiservertest"
)

// runReplicas runs -replicas confirmers sharing the sessions through a members Lease on a
// throwaway API server (envtest, random ports), under the steady load (give it -duration 90s
// or more: a killed replica's sessions wait out the Lease expiry); a third of the way in one
// replica is killed (SIGKILL, as when its node dies), two thirds of the way in another
// is stopped (SIGTERM, as in a rollout). It reports how the sessions spread, how long the
// sessions of each went unwatched, the latency of every call, and whether any call was
// confirmed twice or never.
func runReplicas() error {
	if *replicas < 3 {
		return fmt.Errorf("-replicas %d: the run kills one replica and stops another, so it needs at least 3", *replicas)
	}
	s, err := newSetup()
	if err != nil {
		return err
	}
	defer s.close()
	kubeconfig, stopAPI, err := startAPIServer(s.dir)
	if err != nil {
		return err
	}
	defer stopAPI()

	var cs []*confirmer
	defer func() {
		for _, c := range cs {
			c.stop()
		}
	}()
	for i := range *replicas {
		name := fmt.Sprintf("replica-%d", i)
		c, err := startConfirmer(s, name, []string{"--kubeconfig", kubeconfig, "--members-lease", "bench-confirmer",
			"--leader-election-namespace", "agents", "--leader-election-identity", name})
		if err != nil {
			return err
		}
		cs = append(cs, c)
	}
	started := time.Now()
	s.addSessions()
	if err := waitFor(120*time.Second, func() bool { return eachStreamedOnce(s) }); err != nil {
		return fmt.Errorf("%d of %d sessions streamed once: %w", s.fake.StreamingSessions(), *sessions, err)
	}
	var shares []string
	for _, c := range cs {
		shares = append(shares, fmt.Sprintf("%s %.0f", c.name, c.metric("confirmer_sessions_streamed")))
	}
	fmt.Printf("%d replicas stream %d sessions, each exactly once, %.1f s after they appeared: %s\n",
		*replicas, *sessions, time.Since(started).Seconds(), strings.Join(shares, ", "))

	var wg sync.WaitGroup
	var windows []window
	var events []string
	wg.Go(func() {
		time.Sleep(*duration / 3)
		killed := cs[0]
		w, e := handover(s, "killed (SIGKILL)", killed.name, killed.kill)
		windows, events = append(windows, w), append(events, e)
		time.Sleep(*duration / 3)
		stopped := cs[1]
		w, e = handover(s, "stopped (SIGTERM)", stopped.name, stopped.stop)
		windows, events = append(windows, w), append(events, e)
	})
	calls := steady(s.fake, s.ids, *rate, *duration)
	wg.Wait()
	cs = cs[2:] // the others ended in handover
	for _, e := range events {
		fmt.Println(e)
	}
	if err := report(s.fake, "replicas", fmt.Sprintf("%.0f pauses/s for %s, all calls", *rate, *duration), calls); err != nil {
		return err
	}
	// Split by whether the call paused while a replica's sessions were being handed over.
	var during, outside []call
	for _, c := range calls {
		if inAny(windows, c.pausedAt(s.fake)) {
			during = append(during, c)
		} else {
			outside = append(outside, c)
		}
	}
	if err := report(s.fake, "replicas", "calls paused while no handover was under way", outside); err != nil {
		return err
	}
	if err := report(s.fake, "replicas", "calls paused during the two handovers", during); err != nil {
		return err
	}
	timeline(s.fake, calls, windows)
	return nil
}

// timeline prints the p99 of the calls paused in each 10 s of the run, marking the handovers.
func timeline(fake *anthropictest.Server, calls []call, windows []window) {
	if len(calls) == 0 {
		return
	}
	start := calls[0].pausedAt(fake)
	buckets := map[int][]call{}
	last := 0
	for _, c := range calls {
		b := int(c.pausedAt(fake).Sub(start) / (10 * time.Second))
		buckets[b] = append(buckets[b], c)
		last = max(last, b)
	}
	var line []string
	for b := 0; b <= last; b++ {
		lat, _ := latencies(fake, buckets[b])
		mark := ""
		from, to := start.Add(time.Duration(b)*10*time.Second), start.Add(time.Duration(b+1)*10*time.Second)
		for _, w := range windows {
			if w.from.Before(to) && w.to.After(from) {
				mark = "*"
			}
		}
		line = append(line, fmt.Sprintf("%ds%s %.0f", b*10, mark, ms(pct(lat, 99))))
	}
	fmt.Printf("p99 ms of the calls paused in each 10 s (* a handover under way): %s\n", strings.Join(line, ", "))
}

// window is a span of time in which some sessions had no replica streaming them.
type window struct{ from, to time.Time }

func inAny(ws []window, t time.Time) bool {
	for _, w := range ws {
		if !t.Before(w.from) && !t.After(w.to) {
			return true
		}
	}
	return false
}

// handover ends a replica and measures how long until every session is streamed again.
func handover(s *setup, how, name string, end func()) (window, string) {
	start := time.Now()
	end()
	ended := time.Since(start)
	if err := waitFor(120*time.Second, func() bool { return eachStreamedOnce(s) }); err != nil {
		return window{start, time.Now()}, fmt.Sprintf("%s %s: its sessions were not all taken over: %v", name, how, err)
	}
	return window{start, time.Now()}, fmt.Sprintf("%s %s: every session streamed again by the others %.1f s later (the replica took %.1f s to end)",
		name, how, time.Since(start).Seconds(), ended.Seconds())
}

// eachStreamedOnce reports whether every session has exactly one stream open.
func eachStreamedOnce(s *setup) bool {
	for _, id := range s.ids {
		if s.fake.Streams(id) != 1 {
			return false
		}
	}
	return true
}

// startAPIServer starts a throwaway kube-apiserver and etcd (envtest, random ports) with the
// namespace agents, and writes a kubeconfig for the confirmers into dir.
func startAPIServer(dir string) (kubeconfig string, stop func(), err error) {
	env, err := apiservertest.Environment(false)
	if err != nil {
		return "", nil, err
	}
	cfg, err := env.Start()
	if err != nil {
		return "", nil, err
	}
	stop = func() { _ = env.Stop() } // a throwaway control plane: nothing to report if it fails to stop
	user, err := env.AddUser(envtest.User{Name: "bench-confirmer", Groups: []string{"system:masters"}}, cfg)
	if err == nil {
		var raw []byte
		if raw, err = user.KubeConfig(); err == nil {
			kubeconfig = filepath.Join(dir, "kubeconfig")
			err = os.WriteFile(kubeconfig, raw, 0o600)
		}
	}
	if err == nil {
		_, err = kubernetes.NewForConfigOrDie(cfg).CoreV1().Namespaces().Create(context.Background(),
			&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "agents"}}, metav1.CreateOptions{})
	}
	if err != nil {
		stop()
		return "", nil, err
	}
	return kubeconfig, stop, nil
}
