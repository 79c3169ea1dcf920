package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/intutic/gate-operator/internal/apiservertest"
	"github.com/intutic/gate-operator/internal/testutil"
)

// TestLeaderLoop runs two replicas' election against a real API server: only one runs the
// watch loop at a time, and the other takes over when the leader stops.
func TestLeaderLoop(t *testing.T) {
	cfg := apiservertest.Start(t, false)
	kube := kubernetes.NewForConfigOrDie(cfg)
	if _, err := kube.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "agents"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	var leaders, maxLeaders atomic.Int32
	var mu sync.Mutex
	ran := map[string]bool{}
	run := func(id string) func(context.Context) {
		return func(ctx context.Context) {
			n := leaders.Add(1)
			for {
				m := maxLeaders.Load()
				if n <= m || maxLeaders.CompareAndSwap(m, n) {
					break
				}
			}
			mu.Lock()
			ran[id] = true
			mu.Unlock()
			<-ctx.Done()
			leaders.Add(-1)
		}
	}
	ctxA, stopA := context.WithCancel(context.Background())
	ctxB, stopB := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		leaderLoop(ctxA, kube, "agents", "gate-confirmer", "replica-a", logr.Discard(), run("a"))
	}()
	go func() {
		defer wg.Done()
		leaderLoop(ctxB, kube, "agents", "gate-confirmer", "replica-b", logr.Discard(), run("b"))
	}()
	defer func() { stopA(); stopB(); wg.Wait() }()

	testutil.Eventually(t, 30*time.Second, func() error {
		if n := leaders.Load(); n != 1 {
			return fmt.Errorf("%d leaders", n)
		}
		return nil
	})
	mu.Lock()
	first := "a"
	if ran["b"] {
		first = "b"
	}
	mu.Unlock()
	if first == "a" {
		stopA()
	} else {
		stopB()
	}
	testutil.Eventually(t, 30*time.Second, func() error {
		mu.Lock()
		defer mu.Unlock()
		if !ran["a"] || !ran["b"] || leaders.Load() != 1 {
			return fmt.Errorf("the other replica has not taken over: ran %v, %d leaders", ran, leaders.Load())
		}
		return nil
	})
	if maxLeaders.Load() != 1 {
		t.Fatalf("%d replicas led at once", maxLeaders.Load())
	}
}
