package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gatev1 "github.com/intutic/gate-operator/api/v1alpha1"
	"github.com/intutic/gate-operator/internal/approvals"
	"github.com/intutic/gate-operator/internal/confirm"
	"github.com/intutic/gate-operator/internal/confirmerconfig"
	"github.com/intutic/gate-operator/internal/decisionlog"
)

// The ToolApproval client's own rate limit: a bulk approval of many calls turns into at most
// one write (Expired, AnsweredInRuntime) per call, and the creations follow the calls.
const (
	approvalQPS   = 50
	approvalBurst = 100
)

// startApprovals turns on the human lane when --confirmer-name is set: the ToolApproval client,
// the cache of this SessionConfirmer's approvals, synced before it returns so no pass decides a
// held call without the answers already given, and the Event recorder. The watch that acts on
// the changes starts with the function it returns, once the confirmer (nil when it watches no
// sessions) is wired. Without --confirmer-name it returns nil and a function that does nothing.
func startApprovals(ctx context.Context, wg *sync.WaitGroup, o confirmerconfig.Config, cfg *rest.Config, kube kubernetes.Interface, m *confirm.Metrics, trail *decisionlog.Recorder, log logr.Logger) (*approvals.Store, func(*confirm.Confirmer), error) {
	if o.ConfirmerName == "" {
		return nil, func(*confirm.Confirmer) {}, nil
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, nil, err
	}
	if err := gatev1.AddToScheme(scheme); err != nil {
		return nil, nil, err
	}
	rc := rest.CopyConfig(cfg)
	rc.RateLimiter = nil
	rc.QPS, rc.Burst = approvalQPS, approvalBurst
	rc.UserAgent = rest.DefaultKubernetesUserAgent() + " tool-approvals"
	cl, err := client.New(rc, client.Options{Scheme: scheme})
	if err != nil {
		return nil, nil, err
	}
	ns := o.Namespace
	if ns == "" {
		ns = leaseNamespace(confirmerconfig.Config{})
	}
	if ns == "" {
		return nil, nil, fmt.Errorf("--confirmer-name needs --namespace outside a pod")
	}
	c, err := approvals.NewCache(rc, scheme, ns, o.ConfirmerName)
	if err != nil {
		return nil, nil, err
	}
	informer, err := c.GetInformer(ctx, &gatev1.ToolApproval{})
	if err != nil {
		return nil, nil, err
	}
	wg.Go(func() {
		if err := c.Start(ctx); err != nil {
			log.Error(err, "the ToolApproval cache stopped")
		}
	})
	sctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if !c.WaitForCacheSync(sctx) {
		return nil, nil, fmt.Errorf("the ToolApprovals of %s/%s could not be listed (RBAC: list and watch toolapprovals)", ns, o.ConfirmerName)
	}
	broadcaster := events.NewBroadcaster(&events.EventSinkImpl{Interface: kube.EventsV1()})
	broadcaster.StartRecordingToSink(ctx.Done())
	wg.Go(func() { <-ctx.Done(); broadcaster.Shutdown() })
	a := &approvals.Store{
		Client: cl, Reader: c, Recorder: broadcaster.NewRecorder(scheme, "gate-confirmer"),
		Namespace: ns, Confirmer: o.ConfirmerName, ConfirmerUID: types.UID(o.ConfirmerUID), Policy: o.Policy,
		ShowInput: o.HumanApprovalShowInput, Deadline: o.HumanApprovalDeadline, Log: log, Clock: clock.RealClock{},
		Metrics: &approvals.Metrics{Approvals: m.Approvals, Latency: m.ApprovalLatency}, Trail: trail,
	}
	run := func(cf *confirm.Confirmer) {
		w := &approvals.Watch{Approvals: a}
		if cf != nil {
			w.Confirmer, w.Shard = cf, cf.Shard
		}
		wg.Go(func() {
			if err := w.Run(ctx, informer); err != nil {
				log.Error(err, "the ToolApproval watch stopped")
			}
		})
	}
	log.Info("ToolApprovals on", "namespace", ns, "confirmer", o.ConfirmerName, "policy", o.Policy, "showInput", o.HumanApprovalShowInput)
	return a, run, nil
}
