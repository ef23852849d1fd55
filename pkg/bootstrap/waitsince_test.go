package bootstrap

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// TestWaitNodesReadySince: after a restart, the Ready the API server
// remembers from before it does not count; a fresh one does.
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
