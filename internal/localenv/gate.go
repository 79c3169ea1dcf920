package localenv

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gatev1 "github.com/intutic/gate-operator/api/v1alpha1"
)

var buildPlugin sync.Once

// Gate runs `kubectl gate ARGS` as a user would: kubectl finds the plugin kubectl-gate on PATH
// (built from cmd/kubectl-gate into Dir/bin on first use) and the plugin reads KUBECONFIG. It
// returns the plugin's standard output, or an error carrying its standard error.
func (e *Env) Gate(ctx context.Context, args ...string) (string, error) {
	bin := filepath.Join(e.Dir, "bin")
	var buildErr error
	buildPlugin.Do(func() {
		cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", filepath.Join(bin, "kubectl-gate"), "./cmd/kubectl-gate")
		cmd.Dir, cmd.Env = e.Root, append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("building kubectl-gate: %w: %s", err, out)
		}
	})
	if buildErr != nil {
		return "", buildErr
	}
	cmd := exec.CommandContext(ctx, "kubectl", append([]string{"gate"}, args...)...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+e.Kubeconfig, "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("kubectl gate %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// GrantStatusWriter lets user read ToolApprovals in namespace and write their status, without
// the verb approve on any policy: what stops that user deciding is the admission webhook.
func GrantStatusWriter(ctx context.Context, c client.Client, namespace, user string) error {
	name := "toolapproval-status-writer"
	if err := c.Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{gatev1.GroupVersion.Group}, Resources: []string{"toolapprovals"}, Verbs: []string{"get", "list", "watch"}},
			{APIGroups: []string{gatev1.GroupVersion.Group}, Resources: []string{"toolapprovals/status"}, Verbs: []string{"get", "update", "patch"}},
		},
	}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return c.Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name + "-" + user},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
	})
}
