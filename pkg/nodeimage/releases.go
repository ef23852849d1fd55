package nodeimage

import (
	"context"
	"fmt"
	"net/http"
	"time"
)

// ReleasesReachable returns why dl.k8s.io does not answer for version's
// kubeadm checksum, as a release build would ask first, within 10
// seconds; nil when it answers.
func ReleasesReachable(ctx context.Context, version string) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodHead, "https://dl.k8s.io/release/"+version+"/bin/linux/amd64/kubeadm.sha256", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode >= 400 {
		return fmt.Errorf("dl.k8s.io answered %s", resp.Status)
	}
	return nil
}
