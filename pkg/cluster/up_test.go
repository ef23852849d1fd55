package cluster

import (
	"testing"

	"github.com/hwk-dev/hwk/pkg/cluster/internal/actions"
)

// TestPublicTypesMatchActions checks that the pull policies and default
// timeouts callers see are the ones the steps act on.
func TestPublicTypesMatchActions(t *testing.T) {
	for pub, internal := range map[PullPolicy]actions.PullPolicy{PullMissing: actions.PullMissing, PullAlways: actions.PullAlways, PullNever: actions.PullNever} {
		if string(pub) != string(internal) {
			t.Errorf("pull policy %q is %q to the steps", pub, internal)
		}
	}
	if len(PullPolicies) != 3 {
		t.Errorf("PullPolicies = %v, want the three policies", PullPolicies)
	}
	if got := withDefaults(Timeouts{}); got != DefaultTimeouts || actions.Timeouts(got) != actions.DefaultTimeouts {
		t.Errorf("withDefaults(zero) = %+v, want %+v", got, actions.DefaultTimeouts)
	}
}
