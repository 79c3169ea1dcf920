package localenv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Confirmer is the local process standing in for a SessionConfirmer's pods.
type Confirmer struct {
	Cmd  *exec.Cmd
	Addr string // host:port of its HTTP API
}

// RunConfirmer starts bin/confirmer with the arguments of the SessionConfirmer's Deployment,
// mapping its mounts to local folders kept in sync with the ConfigMap and Secrets the way
// kubelet would (the bundle is re-published through a ..data symlink swap when it changes).
// The local process reaches the API server through the kubeconfig instead of in-cluster
// credentials, and listens on a free loopback port.
func (e *Env) RunConfirmer(ctx context.Context, namespace, name string) (*Confirmer, error) {
	d := &appsv1.Deployment{}
	if err := Wait(ctx, 30*time.Second, func() (bool, error) {
		err := e.Client.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name + "-confirmer"}, d)
		return err == nil, client.IgnoreNotFound(err)
	}); err != nil {
		return nil, fmt.Errorf("waiting for the confirmer Deployment: %w", err)
	}
	pod := d.Spec.Template.Spec
	mounts := map[string]string{} // mount path -> local dir
	for _, m := range pod.Containers[0].VolumeMounts {
		local := filepath.Join(e.Dir, "confirmer-"+name, m.Name)
		mounts[m.MountPath] = local
		for _, v := range pod.Volumes {
			if v.Name != m.Name {
				continue
			}
			switch {
			case v.ConfigMap != nil:
				if err := e.syncConfigMap(ctx, namespace, v.ConfigMap.Name, local); err != nil {
					return nil, err
				}
			case v.Secret != nil:
				if err := e.writeSecret(ctx, namespace, v.Secret.SecretName, local); err != nil {
					return nil, err
				}
			}
		}
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	var args []string
	for _, a := range pod.Containers[0].Args {
		if strings.HasPrefix(a, "--listen=") {
			a = "--listen=" + addr
		}
		for mp, local := range mounts {
			a = strings.Replace(a, "="+mp+"/", "="+local+"/", 1)
		}
		args = append(args, a)
	}
	args = append(args, "--kubeconfig="+e.Kubeconfig, "--leader-election-identity=local-confirmer")
	cmd, err := e.Process("confirmer-"+name, filepath.Join(e.Root, "bin", "confirmer"), args...)
	if err != nil {
		return nil, err
	}
	return &Confirmer{Cmd: cmd, Addr: addr}, nil
}

// syncConfigMap publishes a ConfigMap's data into dir as kubelet does, and keeps doing so
// until the environment stops.
func (e *Env) syncConfigMap(ctx context.Context, namespace, name, dir string) error {
	publish := func(gen int) (string, error) {
		cm := &corev1.ConfigMap{}
		if err := e.Client.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, cm); err != nil {
			return "", err
		}
		return cm.ResourceVersion, publishVolume(dir, gen, cm.Data)
	}
	rv, err := publish(0)
	if err != nil {
		return err
	}
	stop := make(chan struct{})
	e.stops = append(e.stops, func() { close(stop) })
	go func() {
		gen := 0
		tick := time.NewTicker(500 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			cm := &corev1.ConfigMap{}
			if err := e.Client.Get(context.Background(), types.NamespacedName{Namespace: namespace, Name: name}, cm); err != nil || cm.ResourceVersion == rv {
				continue
			}
			gen++
			if err := publishVolume(dir, gen, cm.Data); err == nil {
				rv = cm.ResourceVersion
			}
		}
	}()
	return nil
}

func (e *Env) writeSecret(ctx context.Context, namespace, name, dir string) error {
	s := &corev1.Secret{}
	if err := e.Client.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, s); err != nil {
		return err
	}
	data := map[string]string{}
	for k, v := range s.Data {
		data[k] = string(v)
	}
	return publishVolume(dir, 0, data)
}

// publishVolume writes files into a timestamped folder and swaps the ..data symlink to it.
func publishVolume(dir string, gen int, data map[string]string) error {
	ts := filepath.Join(dir, fmt.Sprintf("..%d", gen))
	if err := os.MkdirAll(ts, 0o700); err != nil {
		return err
	}
	for k, v := range data {
		if err := os.WriteFile(filepath.Join(ts, k), []byte(v), 0o600); err != nil {
			return err
		}
	}
	tmp := filepath.Join(dir, "..data_tmp")
	_ = os.Remove(tmp)
	if err := os.Symlink(filepath.Base(ts), tmp); err != nil {
		return err
	}
	if err := os.Rename(tmp, filepath.Join(dir, "..data")); err != nil {
		return err
	}
	for k := range data {
		link := filepath.Join(dir, k)
		if _, err := os.Lstat(link); errors.Is(err, os.ErrNotExist) {
			if err := os.Symlink(filepath.Join("..data", k), link); err != nil {
				return err
			}
		}
	}
	return nil
}
