package actions

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hwk-dev/hwk/internal/bootstrap"
	"github.com/hwk-dev/hwk/pkg/apis/config"
)

// LabelNodes gives workers the worker role label and makes sure every
// Windows node carries the os=windows:NoSchedule taint its join asked for.
type LabelNodes struct{}

// Name implements Action.
func (LabelNodes) Name() string { return "Labelling nodes" }

// Execute implements Action.
func (LabelNodes) Execute(ctx context.Context, c *Context) error {
	for _, n := range c.Workers("") {
		if err := labelNode(ctx, c, n); err != nil {
			return fmt.Errorf("label node %s: %w", n.Name, err)
		}
	}
	return nil
}

func labelNode(ctx context.Context, c *Context, n config.Node) error {
	nodes := c.Client.CoreV1().Nodes()
	// The kubelet registers the Node as kubeadm join ends, and updates
	// it often while it starts (an update then conflicts): try again
	// soon.
	return retry(ctx, time.Minute, 200*time.Millisecond, func(ctx context.Context) error {
		obj, err := nodes.Get(ctx, n.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if obj.Labels == nil {
			obj.Labels = map[string]string{}
		}
		obj.Labels["node-role.kubernetes.io/worker"] = ""
		if n.OS == config.Windows && !slices.ContainsFunc(obj.Spec.Taints, isWindowsTaint) {
			t := bootstrap.WindowsTaint
			obj.Spec.Taints = append(obj.Spec.Taints, corev1.Taint{Key: t.Key, Value: t.Value, Effect: corev1.TaintEffect(t.Effect)})
		}
		_, err = nodes.Update(ctx, obj, metav1.UpdateOptions{FieldManager: "hwk"})
		return err
	})
}

func isWindowsTaint(t corev1.Taint) bool {
	w := bootstrap.WindowsTaint
	return t.Key == w.Key && t.Value == w.Value && string(t.Effect) == w.Effect
}
