package bootstrap

import (
	"context"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// TestWaitNodesReadySince checks that after a restart, the Ready the API
// server remembers from before it does not count; a fresh one does.
func TestWaitNodesReadySince(t *testing.T) {
	restart := time.Now()
	node := func(hb time.Time) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "demo-cp"}, Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{
			{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: metav1.NewTime(hb)}}}}
	}
	stale := fake.NewClientset(node(restart.Add(-time.Minute)))
	err := WaitNodesReadySince(context.Background(), stale, 300*time.Millisecond, restart, "demo-cp")
	if err == nil || !strings.Contains(err.Error(), "before the restart") {
		t.Errorf("a Ready from before the restart: %v", err)
	}
	if err := WaitNodesReady(context.Background(), stale, 300*time.Millisecond, "demo-cp"); err != nil {
		t.Errorf("without a restart the same node is Ready: %v", err)
	}
	fresh := fake.NewClientset(node(restart.Add(time.Second)))
	if err := WaitNodesReadySince(context.Background(), fresh, 300*time.Millisecond, restart, "demo-cp"); err != nil {
		t.Errorf("a Ready posted after the restart: %v", err)
	}
}

// TestWaitWorkloadsSince checks that after a restart, a Deployment whose
// status still counts its pod from before the stop is not Ready until the
// pod's container has started again; a pod on a node that did not boot
// counts as it is.
func TestWaitWorkloadsSince(t *testing.T) {
	restart := time.Now()
	ws := Workload{Kind: "Deployment", Namespace: "kube-system", Name: "coredns"}
	objects := func(node string, started time.Time) *fake.Clientset {
		one := int32(1)
		sel := &metav1.LabelSelector{MatchLabels: map[string]string{"k8s-app": "kube-dns"}}
		return fake.NewClientset(
			&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "coredns", Namespace: "kube-system"},
				Spec:   appsv1.DeploymentSpec{Replicas: &one, Selector: sel},
				Status: appsv1.DeploymentStatus{ReadyReplicas: 1}},
			&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "coredns-1", Namespace: "kube-system", Labels: sel.MatchLabels},
				Spec: corev1.PodSpec{NodeName: node},
				Status: corev1.PodStatus{
					Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
					ContainerStatuses: []corev1.ContainerStatus{{Name: "coredns",
						State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(started)}}}}}})
	}
	booted := []string{"demo-cp"}
	err := WaitWorkloadsSince(context.Background(), objects("demo-cp", restart.Add(-time.Minute)), 300*time.Millisecond, restart, booted, ws)
	if err == nil || !strings.Contains(err.Error(), "has 0 of 1 pods ready (coredns-1 Ready as of before the restart, not started again since)") {
		t.Errorf("a pod Ready from before the restart: %v", err)
	}
	if err := WaitWorkloads(context.Background(), objects("demo-cp", restart.Add(-time.Minute)), 300*time.Millisecond, ws); err != nil {
		t.Errorf("the status alone counts it: %v", err)
	}
	if err := WaitWorkloadsSince(context.Background(), objects("demo-cp", restart.Add(time.Second)), 300*time.Millisecond, restart, booted, ws); err != nil {
		t.Errorf("a pod started again after the restart: %v", err)
	}
	if err := WaitWorkloadsSince(context.Background(), objects("demo-linux-1", restart.Add(-time.Minute)), 300*time.Millisecond, restart, booted, ws); err != nil {
		t.Errorf("a pod on a node that did not boot: %v", err)
	}
}

// TestClockSkew checks that the skew is the server's creation time of a
// dry-run configmap against this host's clock, here a VM 40 s behind; a
// server that gives no time is an error, not a skew of zero.
func TestClockSkew(t *testing.T) {
	cs := fake.NewClientset()
	var dryRun []string
	cs.PrependReactor("create", "configmaps", func(a k8stesting.Action) (bool, runtime.Object, error) {
		dryRun = a.(k8stesting.CreateActionImpl).GetCreateOptions().DryRun
		cm := a.(k8stesting.CreateAction).GetObject().(*corev1.ConfigMap).DeepCopy()
		cm.CreationTimestamp = metav1.NewTime(time.Now().Add(-40 * time.Second).Truncate(time.Second))
		return true, cm, nil
	})
	skew, err := ClockSkew(context.Background(), cs)
	if err != nil || skew > -39*time.Second || skew < -42*time.Second {
		t.Errorf("skew %s, %v; want about -40s", skew, err)
	}
	if len(dryRun) != 1 || dryRun[0] != metav1.DryRunAll {
		t.Errorf("the configmap was made with dry run %q; want All, so that nothing is stored", dryRun)
	}
	if _, err := ClockSkew(context.Background(), fake.NewClientset()); err == nil {
		t.Error("a server that gave no creation time: no error")
	}
}
