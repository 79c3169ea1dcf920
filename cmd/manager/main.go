// Command manager runs the gate-operator controllers.
package main

import (
	"flag"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	gatev1 "github.com/intutic/gate-operator/api/v1alpha1"
	"github.com/intutic/gate-operator/controllers"
	"github.com/intutic/gate-operator/internal/bootstrap"
)

func main() {
	var (
		metricsAddr, probeAddr string
		leaderElect            bool
		dnsNamespace, dnsPods  string
		resolveMin, resolveMax time.Duration
		resolvConf, mountDir   string
		confirmerImage         string
		nameserver             string
		serviceCIDRs, podCIDRs string
	)
	flag.StringVar(&metricsAddr, "metrics-bind-address", ":8080", "address of the Prometheus metrics endpoint; 0 disables it")
	flag.StringVar(&probeAddr, "health-probe-bind-address", ":8081", "address of /healthz and /readyz")
	flag.BoolVar(&leaderElect, "leader-elect", false, "elect a leader, so only one of several replicas reconciles")
	flag.StringVar(&dnsNamespace, "dns-namespace", bootstrap.DefaultDNSSelector.Namespace, "namespace of the cluster DNS pods that allow-listed sandboxes may query")
	flag.StringVar(&dnsPods, "dns-pod-labels", "k8s-app=kube-dns", "labels of the cluster DNS pods, as key=value[,key=value]")
	flag.DurationVar(&resolveMin, "resolve-min-interval", bootstrap.DefaultMinResolveInterval, "floor of the interval at which allowed hosts are re-resolved")
	flag.DurationVar(&resolveMax, "resolve-max-interval", bootstrap.DefaultMaxResolveInterval, "cap of the interval at which allowed hosts are re-resolved")
	flag.StringVar(&resolvConf, "resolv-conf", "/etc/resolv.conf", "resolver configuration whose nameservers resolve allowed hosts")
	flag.StringVar(&mountDir, "bootstrap-mount-dir", bootstrap.DefaultMountDir, "where sandbox pods mount the bootstrap ConfigMap")
	flag.StringVar(&nameserver, "nameserver", "", "host:port of the DNS server that resolves allowed hosts, instead of the nameservers of --resolv-conf")
	flag.StringVar(&serviceCIDRs, "service-cidrs", bootstrap.DefaultClusterCIDRs, "the cluster's Service ranges, comma-separated: an allowed host's DNS answer inside them is dropped (allowedCIDRs may still cover them); the default, the private ranges, holds most clusters' ranges (docs/egress-carve-outs.md)")
	flag.StringVar(&podCIDRs, "pod-cidrs", bootstrap.DefaultClusterCIDRs, "the cluster's Pod ranges, comma-separated, treated like --service-cidrs")
	flag.StringVar(&confirmerImage, "confirmer-image", "ghcr.io/intutic/gate-confirmer:v0.1.0", "image of the confirmer Deployments, unless a SessionConfirmer sets spec.image")
	opts := zap.Options{}
	opts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&opts)))
	if err := run(metricsAddr, probeAddr, leaderElect, dnsNamespace, dnsPods, resolveMin, resolveMax, resolvConf, nameserver, mountDir, confirmerImage, serviceCIDRs, podCIDRs); err != nil {
		ctrl.Log.Error(err, "manager stopped")
		os.Exit(1)
	}
}

func run(metricsAddr, probeAddr string, leaderElect bool, dnsNamespace, dnsPods string, resolveMin, resolveMax time.Duration, resolvConf, nameserver, mountDir, confirmerImage, serviceCIDRs, podCIDRs string) error {
	podLabels, err := labels.ConvertSelectorToLabelsMap(dnsPods)
	if err != nil || len(podLabels) == 0 {
		return fmt.Errorf("--dns-pod-labels %q is not key=value[,key=value]", dnsPods)
	}
	if strings.TrimSpace(dnsNamespace) == "" {
		return fmt.Errorf("--dns-namespace is empty")
	}
	services, err := bootstrap.ParsePrefixes(serviceCIDRs)
	if err != nil {
		return fmt.Errorf("--service-cidrs: %w", err)
	}
	pods, err := bootstrap.ParsePrefixes(podCIDRs)
	if err != nil {
		return fmt.Errorf("--pod-cidrs: %w", err)
	}
	var resolver *bootstrap.DNSResolver
	if nameserver != "" {
		if _, _, err := net.SplitHostPort(nameserver); err != nil {
			return fmt.Errorf("--nameserver %q is not host:port", nameserver)
		}
		resolver = &bootstrap.DNSResolver{Servers: []string{nameserver}, Timeout: 2 * time.Second}
	} else if resolver, err = bootstrap.NewDNSResolver(resolvConf); err != nil {
		return fmt.Errorf("--resolv-conf: %w", err)
	}

	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	if err := gatev1.AddToScheme(scheme); err != nil {
		return err
	}
	mgr, err := ctrl.NewManager(ctrl.GetConfigOrDie(), ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: metricsAddr},
		HealthProbeBindAddress: probeAddr,
		LeaderElection:         leaderElect,
		LeaderElectionID:       "gate-operator.gate.intutic.io",
		Cache:                  cache.Options{ByObject: controllers.CacheByObject()},
		Client: client.Options{Cache: &client.CacheOptions{
			// Secrets are never read through a cache.
			DisableFor: []client.Object{&corev1.Secret{}},
		}},
	})
	if err != nil {
		return err
	}
	if err := (&controllers.HarnessAgentPolicyReconciler{
		Client:       mgr.GetClient(),
		Recorder:     mgr.GetEventRecorder("gate-operator"),
		Resolver:     resolver,
		DNS:          bootstrap.DNSSelector{Namespace: dnsNamespace, Labels: podLabels},
		ClusterCIDRs: slices.Concat(services, pods),
		Bootstrap:    bootstrap.Options{MountDir: mountDir},
		MinResolve:   resolveMin,
		MaxResolve:   resolveMax,
	}).SetupWithManager(mgr); err != nil {
		return err
	}
	if err := (&controllers.SessionConfirmerReconciler{
		Client:         mgr.GetClient(),
		APIReader:      mgr.GetAPIReader(),
		ConfirmerImage: confirmerImage,
	}).SetupWithManager(mgr); err != nil {
		return err
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return err
	}
	ctrl.Log.Info("starting manager", "metrics", metricsAddr, "probes", probeAddr, "leaderElect", leaderElect)
	return mgr.Start(ctrl.SetupSignalHandler())
}
