package actions

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

	"github.com/hwk-dev/hwk/pkg/apis/config"
)

// systemObjects returns an in-memory cluster of a Linux control plane and, when
// windows, a Windows worker: both nodes Ready, every system workload Ready
// except kube-proxy-windows, whose one pod crash-loops on the worker.
func systemObjects(windows bool) []runtime.Object {
	ready := corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionTrue}
	nodes := []string{"demo-cp"}
	if windows {
		nodes = append(nodes, "demo-win-1")
	}
	var objs []runtime.Object
	for _, n := range nodes {
		objs = append(objs, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}, Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{ready}}})
	}
	ds := func(name string, ready, want int32) *appsv1.DaemonSet {
		return &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: name},
			Spec:   appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"k8s-app": name}}},
			Status: appsv1.DaemonSetStatus{NumberReady: ready, DesiredNumberScheduled: want}}
	}
	deploy := func(name string) *appsv1.Deployment {
		one := int32(1)
		return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: name},
			Spec:   appsv1.DeploymentSpec{Replicas: &one, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"k8s-app": name}}},
			Status: appsv1.DeploymentStatus{ReadyReplicas: 1}}
	}
	objs = append(objs, ds("calico-node", 1, 1), deploy("calico-kube-controllers"), ds("kube-proxy", 1, 1), deploy("coredns"))
	if !windows {
		return objs
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "kube-proxy-windows-x7k2p", Labels: map[string]string{"k8s-app": "kube-proxy-windows"}},
		Spec:       corev1.PodSpec{NodeName: "demo-win-1"},
		Status: corev1.PodStatus{Phase: corev1.PodRunning,
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "kube-proxy", RestartCount: 4,
				State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: "back-off 1m20s restarting failed container=kube-proxy"}}}}},
	}
	event := &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Namespace: "kube-system", Name: "kube-proxy-windows-x7k2p.1"},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "kube-system", Name: "kube-proxy-windows-x7k2p"},
		Type:           corev1.EventTypeWarning, Reason: "BackOff", Message: "Back-off restarting failed container kube-proxy in pod kube-proxy-windows-x7k2p", Count: 5,
		LastTimestamp: metav1.Now(),
	}
	return append(objs, ds("calico-node-windows", 1, 1), ds("kube-proxy-windows", 0, 1), pod, event)
}

func waitContext(windows bool) *Context {
	nodes := []config.Node{{Name: "demo-cp", Role: config.ControlPlane, OS: config.Linux}}
	if windows {
		nodes = append(nodes, config.Node{Name: "demo-win-1", Role: config.Worker, OS: config.Windows})
	}
	return &Context{
		Config:   &config.Cluster{Name: "demo", Nodes: nodes},
		Client:   fake.NewClientset(systemObjects(windows)...),
		Started:  time.Now(),
		Timeouts: Timeouts{NodesReady: 5 * time.Second, Pods: 2 * time.Second},
	}
}

// TestWaitReadyWindows checks that on a cluster with a Windows node, up
// waits for Calico's and kube-proxy's Windows DaemonSets, and a Windows pod
// that never becomes Ready times out naming it, why, and its last events.
func TestWaitReadyWindows(t *testing.T) {
	err := WaitReady{}.Execute(context.Background(), waitContext(true))
	if err == nil {
		t.Fatal("up reported the cluster ready while kube-proxy-windows crash-loops")
	}
	for _, want := range []string{
		"daemonset kube-system/kube-proxy-windows has 0 of 1 pods ready",
		"pod kube-system/kube-proxy-windows-x7k2p on demo-win-1: container kube-proxy CrashLoopBackOff: back-off 1m20s restarting failed container=kube-proxy",
		"event: Warning BackOff: Back-off restarting failed container kube-proxy in pod kube-proxy-windows-x7k2p (x5)",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the timeout does not say %q:\n%v", want, err)
		}
	}
	if strings.Contains(err.Error(), "calico-node-windows has") {
		t.Errorf("a Ready DaemonSet is named as not ready:\n%v", err)
	}
}

// TestWaitReadyLinuxOnly checks that a cluster without Windows nodes does
// not wait for the Windows DaemonSets (which want no pods there).
func TestWaitReadyLinuxOnly(t *testing.T) {
	if err := (WaitReady{}).Execute(context.Background(), waitContext(false)); err != nil {
		t.Fatal(err)
	}
}

// TestWaitNetwork checks that the step before CoreDNS waits for calico-node
// on every node, and on timeout names the pod that is not Ready and why.
func TestWaitNetwork(t *testing.T) {
	c := waitContext(false)
	objs := systemObjects(false)
	for _, o := range objs {
		if ds, ok := o.(*appsv1.DaemonSet); ok && ds.Name == "calico-node" {
			ds.Status.NumberReady = 0
		}
	}
	objs = append(objs, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "calico-node-4xk2z", Labels: map[string]string{"k8s-app": "calico-node"}},
		Spec:       corev1.PodSpec{NodeName: "demo-cp"},
		Status: corev1.PodStatus{Phase: corev1.PodPending, InitContainerStatuses: []corev1.ContainerStatus{{Name: "install-cni",
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}}}},
	})
	c.Client = fake.NewClientset(objs...)
	err := WaitNetwork{}.Execute(context.Background(), c)
	if err == nil {
		t.Fatal("the wait ended while calico-node is not Ready")
	}
	for _, want := range []string{
		"daemonset kube-system/calico-node has 0 of 1 pods ready",
		"pod kube-system/calico-node-4xk2z on demo-cp: container install-cni CrashLoopBackOff",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the timeout does not say %q:\n%v", want, err)
		}
	}
}

// TestWaitNetworkLeavesWindowsNodes checks that CoreDNS, which runs on
// Linux, does not wait for a Windows node, and that WaitReady does, naming
// which.
func TestWaitNetworkLeavesWindowsNodes(t *testing.T) {
	c := waitContext(true)
	objs := systemObjects(true)
	for _, o := range objs {
		if n, ok := o.(*corev1.Node); ok && n.Name == "demo-win-1" {
			n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionFalse, Reason: "KubeletNotReady", Message: "container runtime network not ready"}}
		}
	}
	c.Client = fake.NewClientset(objs...)
	if err := (WaitNetwork{}).Execute(context.Background(), c); err != nil {
		t.Fatalf("WaitNetwork waited for the Windows node: %v", err)
	}
	if got := (WaitNetwork{}).Describe(c); got != "Waiting for the Linux nodes and calico-node to be Ready" {
		t.Errorf("WaitNetwork's step: %q", got)
	}
	if c.NodesReady != 0 {
		t.Errorf("all nodes counted Ready after %s while the Windows node is not", c.NodesReady)
	}
	err := (WaitReady{}).Execute(context.Background(), c)
	if err == nil || !strings.Contains(err.Error(), "demo-win-1: NotReady (KubeletNotReady: container runtime network not ready)") {
		t.Errorf("WaitReady with a NotReady Windows node: %v", err)
	}
}
