package bootstrap

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
)

// pollInterval is how often waits look again.
const pollInterval = 250 * time.Millisecond

// poll calls check until it reports done, ctx ends or timeout passes. On
// timeout the error is check's last word on what is missing, plus what
// explain adds (the pods and events that say why).
func poll(ctx context.Context, timeout time.Duration, what string, check func(context.Context) (bool, string, error), explain func(context.Context) string) error {
	ctx2, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	last := ""
	for {
		done, missing, err := check(ctx2)
		if err == nil && done {
			return nil
		}
		if err != nil {
			missing = err.Error()
		}
		last = missing
		select {
		case <-ctx2.Done():
			if ctx.Err() != nil {
				return ctx.Err()
			}
			msg := fmt.Sprintf("%s: not ready after %s", what, timeout)
			if last != "" {
				msg += ": " + last
			}
			if explain != nil {
				// A fresh context: the wait's own has run out.
				ectx, ecancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
				if more := explain(ectx); more != "" {
					msg += "\n" + more
				}
				ecancel()
			}
			return errors.New(msg)
		case <-time.After(pollInterval):
		}
	}
}

// WaitAPIServer waits until the API server answers /readyz.
func WaitAPIServer(ctx context.Context, cs kubernetes.Interface, timeout time.Duration) error {
	return poll(ctx, timeout, "API server", func(ctx context.Context) (bool, string, error) {
		body, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		if err != nil {
			return false, strings.TrimSpace(string(body) + " " + err.Error()), nil
		}
		return true, "", nil
	}, nil)
}

// ClockSkew returns how far the API server's clock is ahead of this
// host's, a second low at most (the server's times are whole seconds). It
// creates a configmap with dry run, so nothing is stored.
func ClockSkew(ctx context.Context, cs kubernetes.Interface) (time.Duration, error) {
	// Why: node and pod times come from the nodes' clocks, which a Docker
	// Desktop or WSL VM keeps apart from Windows', and which drift after
	// the host sleeps. The skew is the creation time the server gives the
	// configmap against this host's clock at the answer.
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{GenerateName: "hwk-clock-"}}
	made, err := cs.CoreV1().ConfigMaps(metav1.NamespaceDefault).Create(ctx, cm, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	now := time.Now()
	if err != nil {
		return 0, fmt.Errorf("read the API server's clock: %w", err)
	}
	if made.CreationTimestamp.IsZero() {
		return 0, errors.New("read the API server's clock: the dry-run configmap has no creation time")
	}
	return made.CreationTimestamp.Sub(now), nil
}

// Workload names a DaemonSet or Deployment to wait for.
type Workload struct {
	Kind      string // "DaemonSet" or "Deployment"
	Namespace string
	Name      string
}

func (w Workload) String() string {
	return fmt.Sprintf("%s %s/%s", strings.ToLower(w.Kind), w.Namespace, w.Name)
}

// CalicoNode is Calico's Linux DaemonSet.
var CalicoNode = Workload{Kind: "DaemonSet", Namespace: "kube-system", Name: "calico-node"}

// SystemWorkloads returns the cluster's own workloads: Calico, kube-proxy and
// CoreDNS, and with windows Calico's and kube-proxy's Windows DaemonSets
// too (a Windows node can be Ready while they crash-loop on it).
func SystemWorkloads(windows bool) []Workload {
	ws := []Workload{
		CalicoNode,
		{Kind: "Deployment", Namespace: "kube-system", Name: "calico-kube-controllers"},
		{Kind: "DaemonSet", Namespace: "kube-system", Name: "kube-proxy"},
		{Kind: "Deployment", Namespace: "kube-system", Name: "coredns"},
	}
	if windows {
		ws = append(ws,
			Workload{Kind: "DaemonSet", Namespace: "kube-system", Name: CalicoNodeWindows},
			Workload{Kind: "DaemonSet", Namespace: "kube-system", Name: KubeProxyWindows})
	}
	return ws
}

// WaitWorkloads waits until every pod each workload wants exists and is
// Ready. On timeout it names the pods that are not, with their last
// events.
func WaitWorkloads(ctx context.Context, cs kubernetes.Interface, timeout time.Duration, ws ...Workload) error {
	return waitWorkloads(ctx, cs, timeout, nil, ws)
}

// WaitWorkloadsSince waits as WaitWorkloads does, except that a pod on a
// node named in booted, which booted again at since, counts only once
// every container of it has started since then.
func WaitWorkloadsSince(ctx context.Context, cs kubernetes.Interface, timeout time.Duration, since time.Time, booted []string, ws ...Workload) error {
	// Why: until the controller manager, itself just started again, has
	// looked at the pods, a workload's status still counts those Ready
	// before the stop (a one-node cluster's start used to wait for
	// nothing).
	return waitWorkloads(ctx, cs, timeout, func(p *corev1.Pod) bool {
		if !slices.Contains(booted, p.Spec.NodeName) {
			return true
		}
		for _, c := range p.Status.ContainerStatuses {
			if c.State.Running == nil || c.State.Running.StartedAt.Time.Before(since) {
				return false
			}
		}
		return len(p.Status.ContainerStatuses) > 0
	}, ws)
}

// waitWorkloads does WaitWorkloads' work; with fresh, a workload's Ready
// pods are counted from its pods, those fresh accepts, instead of its
// status.
func waitWorkloads(ctx context.Context, cs kubernetes.Interface, timeout time.Duration, fresh func(*corev1.Pod) bool, ws []Workload) error {
	names := make([]string, len(ws))
	for i, w := range ws {
		names[i] = w.String()
	}
	var selectors []podSet
	return poll(ctx, timeout, strings.Join(names, ", "), func(ctx context.Context) (bool, string, error) {
		selectors = selectors[:0]
		var missing []string
		for _, w := range ws {
			ready, want, sel, err := WorkloadStatus(ctx, cs, w)
			var stale []string
			if err == nil && fresh != nil {
				ready, stale, err = freshReady(ctx, cs, w.Namespace, sel, fresh)
			}
			if err != nil {
				return false, "", err
			}
			selectors = append(selectors, podSet{w.Namespace, sel})
			if want == 0 || ready < want {
				m := fmt.Sprintf("%s has %d of %d pods ready", w, ready, want)
				// explainPods passes over Ready pods: say why these
				// do not count.
				if len(stale) > 0 {
					m += fmt.Sprintf(" (%s Ready as of before the restart, not started again since)", strings.Join(stale, ", "))
				}
				missing = append(missing, m)
			}
		}
		return len(missing) == 0, strings.Join(missing, "; "), nil
	}, func(ctx context.Context) string { return explainPods(ctx, cs, selectors) })
}

// freshReady counts the pods of sel in ns that are Ready, not being
// deleted, and fresh, and names those only fresh turned down.
func freshReady(ctx context.Context, cs kubernetes.Interface, ns string, sel labels.Selector, fresh func(*corev1.Pod) bool) (int32, []string, error) {
	pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		return 0, nil, err
	}
	var n int32
	var stale []string
	for i := range pods.Items {
		p := &pods.Items[i]
		switch {
		case p.DeletionTimestamp != nil || !PodReady(p):
		case fresh(p):
			n++
		default:
			stale = append(stale, p.Name)
		}
	}
	return n, stale, nil
}

type podSet struct {
	namespace string
	selector  labels.Selector
}

// WorkloadStatus reports how many of a workload's pods are Ready, how many
// it wants, and the selector of its pods.
func WorkloadStatus(ctx context.Context, cs kubernetes.Interface, w Workload) (ready, want int32, sel labels.Selector, err error) {
	var ls *metav1.LabelSelector
	switch w.Kind {
	case "DaemonSet":
		var ds *appsv1.DaemonSet
		ds, err = cs.AppsV1().DaemonSets(w.Namespace).Get(ctx, w.Name, metav1.GetOptions{})
		if err == nil {
			ready, want, ls = ds.Status.NumberReady, ds.Status.DesiredNumberScheduled, ds.Spec.Selector
		}
	case "Deployment":
		var d *appsv1.Deployment
		d, err = cs.AppsV1().Deployments(w.Namespace).Get(ctx, w.Name, metav1.GetOptions{})
		if err == nil {
			ready, ls = d.Status.ReadyReplicas, d.Spec.Selector
			want = 1
			if d.Spec.Replicas != nil {
				want = *d.Spec.Replicas
			}
		}
	default:
		return 0, 0, nil, fmt.Errorf("cannot wait for a %s", w.Kind)
	}
	if err != nil {
		return 0, 0, nil, fmt.Errorf("%s: %w", w, err)
	}
	sel, err = metav1.LabelSelectorAsSelector(ls)
	return ready, want, sel, err
}

// explainPods lists the pods of sets that are not Ready, each with why
// and its last events.
func explainPods(ctx context.Context, cs kubernetes.Interface, sets []podSet) string {
	var b strings.Builder
	for _, s := range sets {
		pods, err := cs.CoreV1().Pods(s.namespace).List(ctx, metav1.ListOptions{LabelSelector: s.selector.String()})
		if err != nil {
			fmt.Fprintf(&b, "  (cannot list pods in %s: %v)\n", s.namespace, err)
			continue
		}
		for _, p := range pods.Items {
			if PodReady(&p) {
				continue
			}
			fmt.Fprintf(&b, "  pod %s/%s on %s: %s\n", p.Namespace, p.Name, orNone(p.Spec.NodeName), podProblem(&p))
			for _, e := range lastEvents(ctx, cs, p.Namespace, "Pod", p.Name, 3) {
				fmt.Fprintf(&b, "    event: %s\n", e)
			}
		}
	}
	return strings.TrimRight(b.String(), "\n")
}

func orNone(s string) string {
	if s == "" {
		return "no node"
	}
	return s
}

// PodReady reports whether a pod's Ready condition is true.
func PodReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// podProblem returns in a few words why a pod is not Ready: a waiting or
// crashed container's reason, else the pod's phase and conditions.
func podProblem(p *corev1.Pod) string {
	statuses := slices.Concat(p.Status.InitContainerStatuses, p.Status.ContainerStatuses)
	for _, s := range statuses {
		switch {
		case s.State.Waiting != nil && s.State.Waiting.Reason != "":
			msg := fmt.Sprintf("container %s %s", s.Name, s.State.Waiting.Reason)
			if s.State.Waiting.Message != "" {
				msg += ": " + firstLine(s.State.Waiting.Message)
			}
			return msg
		case s.State.Terminated != nil && s.State.Terminated.ExitCode != 0:
			return fmt.Sprintf("container %s exited %d (%s)", s.Name, s.State.Terminated.ExitCode, s.State.Terminated.Reason)
		case s.State.Running != nil && !s.Ready && !isInit(p, s.Name):
			return fmt.Sprintf("container %s running, not ready (restarts: %d)", s.Name, s.RestartCount)
		}
	}
	for _, c := range p.Status.Conditions {
		if c.Status != corev1.ConditionTrue && c.Message != "" {
			return fmt.Sprintf("%s, %s: %s", p.Status.Phase, c.Type, firstLine(c.Message))
		}
	}
	return string(p.Status.Phase)
}

func isInit(p *corev1.Pod, name string) bool {
	for _, c := range p.Spec.InitContainers {
		if c.Name == name {
			return true
		}
	}
	return false
}

// firstLine returns the first line of s, cut to a length that fits a terminal
// line or two.
func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	if len(s) > 240 {
		s = s[:237] + "..."
	}
	return s
}

// lastEvents returns the newest n events about an object, oldest first.
func lastEvents(ctx context.Context, cs kubernetes.Interface, namespace, kind, name string, n int) []string {
	evs, err := cs.CoreV1().Events(namespace).List(ctx, metav1.ListOptions{
		FieldSelector: "involvedObject.kind=" + kind + ",involvedObject.name=" + name,
	})
	if err != nil {
		return []string{"(cannot list events: " + err.Error() + ")"}
	}
	items := evs.Items
	sort.Slice(items, func(i, j int) bool { return eventTime(items[i]).Before(eventTime(items[j])) })
	if len(items) > n {
		items = items[len(items)-n:]
	}
	out := make([]string, len(items))
	for i, e := range items {
		out[i] = fmt.Sprintf("%s %s: %s", e.Type, e.Reason, firstLine(e.Message))
		if e.Count > 1 {
			out[i] += fmt.Sprintf(" (x%d)", e.Count)
		}
	}
	return out
}

func eventTime(e corev1.Event) time.Time {
	switch {
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	default:
		return e.CreationTimestamp.Time
	}
}

// WaitNodesReady waits until every named node is registered and Ready. On
// timeout it gives each missing node's Ready condition and last events.
func WaitNodesReady(ctx context.Context, cs kubernetes.Interface, timeout time.Duration, names ...string) error {
	return WaitNodesReadySince(ctx, cs, timeout, time.Time{}, names...)
}

// WaitNodesReadySince waits as WaitNodesReady does, for nodes that restarted
// at since: a Ready condition the kubelet last posted before then is what
// the API server remembers from before the restart, not news, and does not
// count.
func WaitNodesReadySince(ctx context.Context, cs kubernetes.Interface, timeout time.Duration, since time.Time, names ...string) error {
	var notReady []string
	return poll(ctx, timeout, "nodes "+strings.Join(names, ", "), func(ctx context.Context) (bool, string, error) {
		notReady = notReady[:0]
		var missing []string
		for _, n := range names {
			node, err := cs.CoreV1().Nodes().Get(ctx, n, metav1.GetOptions{})
			if err != nil {
				notReady = append(notReady, n)
				missing = append(missing, fmt.Sprintf("%s: %v", n, err))
				continue
			}
			if ok, why := NodeReady(node); !ok {
				notReady = append(notReady, n)
				missing = append(missing, fmt.Sprintf("%s: %s", n, why))
			} else if hb := readyHeartbeat(node); hb.Before(since) {
				notReady = append(notReady, n)
				missing = append(missing, fmt.Sprintf("%s: Ready as of %s, before the restart; its kubelet has not reported since", n, hb.Format(time.TimeOnly)))
			}
		}
		return len(missing) == 0, strings.Join(missing, "; "), nil
	}, func(ctx context.Context) string {
		var b strings.Builder
		for _, n := range notReady {
			for _, e := range lastEvents(ctx, cs, "", "Node", n, 3) {
				fmt.Fprintf(&b, "  node %s event: %s\n", n, e)
			}
		}
		// A node is not Ready mostly because a system pod on it (the
		// network plugin) is not: say which, and why.
		b.WriteString(explainPods(ctx, cs, []podSet{{"kube-system", labels.Everything()}}))
		return strings.TrimRight(b.String(), "\n")
	})
}

// readyHeartbeat returns when the node's kubelet last posted its Ready
// condition.
func readyHeartbeat(n *corev1.Node) time.Time {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.LastHeartbeatTime.Time
		}
	}
	return time.Time{}
}

// NodeReady reports a node's Ready condition and, when not ready, why.
func NodeReady(n *corev1.Node) (bool, string) {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			if c.Status == corev1.ConditionTrue {
				return true, ""
			}
			why := c.Reason
			if c.Message != "" {
				why += ": " + firstLine(c.Message)
			}
			return false, "NotReady (" + why + ")"
		}
	}
	return false, "no Ready condition yet"
}
