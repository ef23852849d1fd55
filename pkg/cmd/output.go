package cmd

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"

	"github.com/hwk-dev/hwk/pkg/cluster"
)

// outputFlag is -o/--output for commands that print data.
type outputFlag struct {
	format  string
	allowed []string
}

func (o *outputFlag) register(cmd *cobra.Command, def string, allowed ...string) {
	o.allowed = allowed
	cmd.Flags().StringVarP(&o.format, "output", "o", def, "output format: "+strings.Join(allowed, ", "))
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions(allowed, cobra.ShellCompDirectiveNoFileComp))
}

// print writes v as JSON or YAML, or calls text for the human format.
func (o *outputFlag) print(w io.Writer, v any, text func()) error {
	if err := o.check(); err != nil {
		return err
	}
	switch o.format {
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	case "yaml":
		enc := yaml.NewEncoder(w)
		enc.SetIndent(2)
		if err := enc.Encode(v); err != nil {
			return err
		}
		return enc.Close()
	default:
		text()
		return nil
	}
}

// check refuses a format the command does not print.
func (o *outputFlag) check() error {
	if !slices.Contains(o.allowed, o.format) {
		return fmt.Errorf("--output %q is not supported; use %s", o.format, strings.Join(o.allowed, ", "))
	}
	return nil
}

// yamlToAny decodes YAML into generic values, for printing as JSON.
func yamlToAny(data []byte) any {
	var v any
	if err := yaml.Unmarshal(data, &v); err != nil {
		return string(data)
	}
	return v
}

// showStepError keeps a failed step's details, which its step line has
// shown already, from being printed twice.
func showStepError(g *globals, verb string, err error) error {
	var step *cluster.StepError
	if g.quiet || !errors.As(err, &step) {
		return err
	}
	return &shownError{err: err, summary: fmt.Sprintf("hwk %s stopped at %q (details above)", verb, step.Step)}
}
