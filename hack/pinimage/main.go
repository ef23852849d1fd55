// Command pinimage records a published node image's digest in
// node-images/published.yaml: the publishing workflow runs it after
// `hwk node-image push`, then opens a pull request with the change.
// -repository records where the image was pushed when that is not where
// the file says (a local registry under `make workflows`).
//
//	go run ./hack/pinimage [-repository ghcr.io/hwk-dev/node] -version v1.35.4 -digest sha256:...
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/hwk-dev/hwk/internal/nodeimage/imagedist"
)

func main() {
	file := flag.String("file", "node-images/published.yaml", "the pin file")
	version := flag.String("version", "", "Kubernetes version of the image, e.g. v1.35.4")
	digest := flag.String("digest", "", "digest of the pushed OCI index, sha256:...")
	repository := flag.String("repository", "", "where the image was pushed, REGISTRY/NAME (default: where the file says)")
	flag.Parse()
	if err := run(*file, *repository, *version, *digest); err != nil {
		fmt.Fprintln(os.Stderr, "pinimage:", err)
		os.Exit(1)
	}
}

func run(file, repository, version, digest string) error {
	if version == "" || digest == "" {
		return fmt.Errorf("give -version and -digest")
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	if repository != "" {
		pins, err := imagedist.ParsePins(data)
		if err != nil {
			return err
		}
		if pins.Registry+"/"+pins.Repository != repository {
			if data, err = imagedist.SetRepository(data, repository); err != nil {
				return err
			}
		}
	}
	out, err := imagedist.SetPin(data, version, digest)
	if err != nil {
		return err
	}
	return os.WriteFile(file, out, 0o644)
}
