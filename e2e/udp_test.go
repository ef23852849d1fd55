//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"github.com/hwk-dev/hwk/internal/bootstrap"
)

// testUDPConntrack: kube-proxy deletes the conntrack entries of a UDP
// flow whose endpoint went away, over netlink, inside the node container.
// A client on cp sends to a Service from one fixed port, so every datagram
// is one conntrack flow; the server pod is replaced by one with another
// address, and the flow must reach the new pod. Were conntrack deletion
// refused in the node's network namespace, the entry would keep
// translating to the dead pod's address for as long as the client sends.
//
// (A Service *port* removed while a flow uses it is another matter: kube-
// proxy v1.35 leaves such flows alone by design, see the troubleshooting
// page.)
func testUDPConntrack(t *testing.T, cs kubernetes.Interface, cp, worker string) {
	ctx := context.Background()
	pods := cs.CoreV1().Pods("default")
	server := func(name string) *corev1.Pod {
		p := probePod(name, worker, "udp-serve", "9000")
		p.Labels["app"] = "udp-server"
		p.Spec.RestartPolicy = corev1.RestartPolicyAlways
		return p
	}
	if _, err := pods.Create(ctx, server("udp-server-a"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	svc, err := cs.CoreV1().Services("default").Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "udp-svc"},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "udp-server"}, Ports: []corev1.ServicePort{
			{Name: "u", Port: 9001, Protocol: corev1.ProtocolUDP, TargetPort: intstr.FromInt32(9000)}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	a := waitPod(t, cs, "udp-server-a", bootstrap.PodReady)
	client := probePod("udp-client", cp, "udp-send", fmt.Sprintf("%s:9001", svc.Spec.ClusterIP), "40000")
	client.Spec.RestartPolicy = corev1.RestartPolicyAlways
	if _, err := pods.Create(ctx, client, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, p := range []string{"udp-client", "udp-server-a", "udp-server-b"} {
			_ = pods.Delete(ctx, p, metav1.DeleteOptions{})
		}
		_ = cs.CoreV1().Services("default").Delete(ctx, "udp-svc", metav1.DeleteOptions{})
	})
	waitLog(t, cs, "udp-server-a", ":40000")

	if err := pods.Delete(ctx, "udp-server-a", metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		t.Fatal(err)
	}
	if _, err := pods.Create(ctx, server("udp-server-b"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	b := waitPod(t, cs, "udp-server-b", bootstrap.PodReady)
	if a.Status.PodIP == b.Status.PodIP {
		t.Fatalf("the new server has the old one's address %s: the test proves nothing", b.Status.PodIP)
	}
	began := time.Now()
	waitLog(t, cs, "udp-server-b", ":40000")
	t.Logf("the flow from port 40000 moved from %s to %s within %s of the new pod's readiness", a.Status.PodIP, b.Status.PodIP, time.Since(began).Round(100*time.Millisecond))
	entry := docker(t, nil, "exec", cp, "sh", "-c", "grep 'sport=40000' /proc/net/nf_conntrack || true")
	if strings.Contains(entry, "src="+a.Status.PodIP+" ") {
		t.Errorf("a conntrack entry still points at the old pod:\n%s", entry)
	}

	// The UDP port removed (a TCP port takes its place), a new flow to it
	// reaches nothing. (The flow from 40000 goes on reaching the pod while
	// it keeps sending: kube-proxy v1.35 leaves it, see the troubleshooting page.)
	svc, err = cs.CoreV1().Services("default").Get(ctx, "udp-svc", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	svc.Spec.Ports = []corev1.ServicePort{{Name: "t", Port: 9002, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(9000)}}
	if _, err := cs.CoreV1().Services("default").Update(ctx, svc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for strings.Contains(docker(t, nil, "exec", cp, "iptables-save", "-t", "nat"), "default/udp-svc:u") {
		if time.Now().After(deadline) {
			t.Fatal("kube-proxy on the control plane never removed the Service's UDP port")
		}
		time.Sleep(time.Second)
	}
	late := probePod("udp-client-late", cp, "udp-send", fmt.Sprintf("%s:9001", svc.Spec.ClusterIP), "40001")
	if _, err := pods.Create(ctx, late, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pods.Delete(ctx, "udp-client-late", metav1.DeleteOptions{}) })
	waitPod(t, cs, "udp-client-late", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
	time.Sleep(10 * time.Second) // 50 datagrams
	out, err := cs.CoreV1().Pods("default").GetLogs("udp-server-b", &corev1.PodLogOptions{}).DoRaw(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), ":40001") {
		t.Errorf("a new flow reached the pod through a removed UDP Service port:\n%s", out)
	}
}

// waitLog waits until the pod's log holds want.
func waitLog(t *testing.T, cs kubernetes.Interface, pod, want string) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		out, err := cs.CoreV1().Pods("default").GetLogs(pod, &corev1.PodLogOptions{}).DoRaw(context.Background())
		if err == nil && strings.Contains(string(out), want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("pod %s never logged %q: %v\n%s", pod, want, err, out)
		}
		time.Sleep(time.Second)
	}
}
