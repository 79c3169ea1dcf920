package e2e

import (
	"context"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	gatev1 "github.com/intutic/gate-operator/api/v1alpha1"
	"github.com/intutic/gate-operator/internal/localenv"
)

// testChildrenWritableOnlyByTheManager: users bound to the built-in edit and admin ClusterRoles
// in the agents namespace, whom RBAC lets write its ConfigMaps and NetworkPolicies, cannot
// kubectl edit, patch or delete the policy's bootstrap ConfigMap or egress NetworkPolicy: the
// chart's ValidatingAdmissionPolicy managed-children refuses them with its message, naming the
// manager's ServiceAccount. The children are unchanged and the policy stays Ready. (That the
// manager still writes them is the policy edit after this subtest; that the garbage collector
// still deletes them is the policy's deletion at the end.)
func testChildrenWritableOnlyByTheManager(ctx context.Context, t *testing.T, env *localenv.Env) {
	c := env.Client
	const policy = "coding-agents"
	bundle, egress := policy+"-bootstrap", policy+"-egress"
	manager := "system:serviceaccount:" + localenv.OperatorNamespace + ":gate-operator"

	cm, np := &corev1.ConfigMap{}, &networkingv1.NetworkPolicy{}
	must(t, c.Get(ctx, types.NamespacedName{Namespace: ns, Name: bundle}, cm))
	must(t, c.Get(ctx, types.NamespacedName{Namespace: ns, Name: egress}, np))

	// An editor that sets a label on whatever kubectl edit opens.
	editor := filepath.Join(t.TempDir(), "editor.sh")
	must(t, os.WriteFile(editor, []byte("#!/bin/sh\nsed -i 's/^  labels:$/  labels:\\n    tampered: \"true\"/' \"$1\"\n"), 0o755))

	for user, role := range map[string]string{"agents-editor": "edit", "agents-admin": "admin"} {
		must(t, c.Create(ctx, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: user},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
			Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
		}))
	}
	for _, user := range []string{"agents-editor", "agents-admin"} {
		// RBAC lets them: what refuses them below is the admission policy.
		for _, a := range []authorizationv1.ResourceAttributes{
			{Namespace: ns, Verb: "update", Resource: "configmaps", Name: bundle},
			{Namespace: ns, Verb: "patch", Resource: "configmaps", Name: bundle},
			{Namespace: ns, Verb: "delete", Resource: "configmaps", Name: bundle},
			{Namespace: ns, Verb: "update", Group: "networking.k8s.io", Resource: "networkpolicies", Name: egress},
			{Namespace: ns, Verb: "patch", Group: "networking.k8s.io", Resource: "networkpolicies", Name: egress},
			{Namespace: ns, Verb: "delete", Group: "networking.k8s.io", Resource: "networkpolicies", Name: egress},
		} {
			if !allowed(ctx, t, c, user, a) {
				t.Errorf("%s may not %s %s %s in %s: the built-in role is not what this test assumes", user, a.Verb, a.Resource, a.Name, ns)
			}
		}
		for _, tc := range []struct {
			name string
			args []string
		}{
			{"kubectl edit the bundle", []string{"edit", "configmap", bundle}},
			{"kubectl patch the bundle", []string{"patch", "configmap", bundle, "--type=merge", "-p", `{"data":{"policy-snapshot.rules":"[]"}}`}},
			{"kubectl label the bundle off", []string{"label", "configmap", bundle, "app.kubernetes.io/managed-by-"}},
			{"kubectl delete the bundle", []string{"delete", "configmap", bundle, "--wait=false"}},
			{"kubectl edit the NetworkPolicy", []string{"edit", "networkpolicy", egress}},
			{"kubectl patch the NetworkPolicy", []string{"patch", "networkpolicy", egress, "--type=merge", "-p", `{"spec":{"egress":[{}]}}`}},
			{"kubectl delete the NetworkPolicy", []string{"delete", "networkpolicy", egress, "--wait=false"}},
			{"kubectl create a labelled ConfigMap", []string{"create", "-f", "-"}},
		} {
			stdin := ""
			if tc.args[0] == "create" {
				stdin = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: forged-bootstrap\n  labels:\n    app.kubernetes.io/managed-by: gate-operator\ndata:\n  policy-snapshot.rules: \"[]\"\n"
			}
			out, err := kubectlWithEditor(ctx, env, editor, stdin, append([]string{"--as=" + user, "-n", ns}, tc.args...)...)
			switch {
			case err == nil:
				t.Errorf("%s: %s was allowed: %s", user, tc.name, out)
			case !strings.Contains(err.Error(), "managed-by: gate-operator") || !strings.Contains(err.Error(), manager):
				t.Errorf("%s: %s was refused, but not by the managed-children policy: %v", user, tc.name, err)
			}
		}
	}

	// The children are as the manager wrote them, and the policy stays Ready.
	cmAfter, npAfter := &corev1.ConfigMap{}, &networkingv1.NetworkPolicy{}
	must(t, c.Get(ctx, types.NamespacedName{Namespace: ns, Name: bundle}, cmAfter))
	must(t, c.Get(ctx, types.NamespacedName{Namespace: ns, Name: egress}, npAfter))
	if cmAfter.UID != cm.UID || !maps.Equal(cmAfter.Data, cm.Data) || !maps.Equal(cmAfter.Labels, cm.Labels) {
		t.Errorf("the bundle changed: labels %v, was %v", cmAfter.Labels, cm.Labels)
	}
	if npAfter.UID != np.UID || !reflect.DeepEqual(npAfter.Spec, np.Spec) || !maps.Equal(npAfter.Labels, np.Labels) {
		t.Errorf("the egress NetworkPolicy changed: %v, was %v", npAfter.Spec, np.Spec)
	}
	p := &gatev1.HarnessAgentPolicy{}
	wait(t, "the policy is still Ready", func() bool {
		return c.Get(ctx, types.NamespacedName{Namespace: ns, Name: policy}, p) == nil &&
			p.Status.ObservedGeneration == p.Generation && meta.IsStatusConditionTrue(p.Status.Conditions, gatev1.ConditionReady)
	})
}

// kubectlWithEditor runs kubectl as env.Kubectl does, with editor as KUBE_EDITOR (for kubectl
// edit; the copy it keeps of a refused edit goes to the editor's folder, not /tmp), and returns
// its output, the error carrying its stderr.
func kubectlWithEditor(ctx context.Context, env *localenv.Env, editor, stdin string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "kubectl", append([]string{"--kubeconfig", env.Kubeconfig}, args...)...)
	cmd.Env = append(os.Environ(), "KUBE_EDITOR="+editor, "TMPDIR="+filepath.Dir(editor))
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), &kubectlError{args: args, err: err, stderr: strings.TrimSpace(stderr.String() + " " + stdout.String())}
	}
	return stdout.String(), nil
}

type kubectlError struct {
	args   []string
	err    error
	stderr string
}

func (e *kubectlError) Error() string {
	return "kubectl " + strings.Join(e.args, " ") + ": " + e.err.Error() + ": " + e.stderr
}
