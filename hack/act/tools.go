//go:build tools

// Package act pins nektos/act, which `make workflows` builds and runs to
// execute hwk's GitHub workflows and Action on this machine, offline
// (hack/workflows). It is a module of its own so that hwk's go.mod does
// not carry act's dependencies.
package act

import _ "github.com/nektos/act"
