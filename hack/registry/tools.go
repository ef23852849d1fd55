//go:build tools

// Package registry pins CNCF distribution's registry, which hwk's tests
// build and run as a real registry process (internal/testing/registrytest). It
// is a module of its own so that hwk's go.mod does not carry the
// registry's dependencies.
package registry

import _ "github.com/distribution/distribution/v3/cmd/registry"
