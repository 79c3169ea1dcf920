// Package webhooktest helps the webhook tests: it reads the install's webhook configurations for
// envtest, and plays kubelet's part by keeping a directory to a
// Secret's data as a mounted Secret volume is kept. Only tests import it.
package webhooktest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// MountSecret keeps dir to the data of the Secret key names, until ctx ends, the way kubelet
// keeps a mounted Secret: the files are links into ..data, a link to a directory of the data
// that is swapped whole when the Secret changes, and the old directory is then removed. It
// polls every 100 ms and starts writing once the Secret holds tls.crt. Run it in a goroutine.
func MountSecret(ctx context.Context, t testing.TB, c client.Reader, key client.ObjectKey, dir string) {
	var last string
	for ctx.Err() == nil {
		s := &corev1.Secret{}
		if err := c.Get(ctx, key, s); err == nil && len(s.Data["tls.crt"]) > 0 && string(s.Data["tls.crt"])+string(s.Data["tls.key"]) != last {
			if err := swap(dir, s.Data); err != nil {
				t.Errorf("mounting Secret %s: %v", key, err)
				return
			}
			last = string(s.Data["tls.crt"]) + string(s.Data["tls.key"])
		}
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}

var generation atomic.Int64

func swap(dir string, data map[string][]byte) error {
	ts := fmt.Sprintf("..%d", generation.Add(1))
	if err := os.Mkdir(filepath.Join(dir, ts), 0o750); err != nil {
		return err
	}
	for k, v := range data {
		if err := os.WriteFile(filepath.Join(dir, ts, k), v, 0o440); err != nil {
			return err
		}
	}
	old, _ := os.Readlink(filepath.Join(dir, "..data"))
	if err := os.Symlink(ts, filepath.Join(dir, "..data_tmp")); err != nil {
		return err
	}
	if err := os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")); err != nil {
		return err
	}
	for k := range data {
		link := filepath.Join(dir, k)
		if _, err := os.Lstat(link); os.IsNotExist(err) {
			if err := os.Symlink(filepath.Join("..data", k), link); err != nil {
				return err
			}
		}
	}
	if old != "" {
		return os.RemoveAll(filepath.Join(dir, old))
	}
	return nil
}
