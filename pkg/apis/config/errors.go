package config

import (
	"fmt"
	"strings"
)

// FieldError is one problem with one field of a config.
type FieldError struct {
	// Path is the field's path, as in nodes[1].memory, or a flag such as
	// --windows-workers when a flag's value is at fault.
	Path string
	// Message is what is wrong and how to fix it.
	Message string
	// Line is the line of the config file the field is on, 0 when the field
	// did not come from a file.
	Line int
}

func (e FieldError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("line %d: %s: %s", e.Line, e.Path, e.Message)
	}
	return e.Path + ": " + e.Message
}

// Errors is every problem found in a config, in field order.
type Errors []FieldError

func (es Errors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// orNil keeps a nil error nil: an empty Errors stored in an error interface
// would not be.
func (es Errors) orNil() error {
	if len(es) == 0 {
		return nil
	}
	return es
}

func (es *Errors) add(path, format string, args ...any) {
	*es = append(*es, FieldError{Path: path, Message: fmt.Sprintf(format, args...)})
}
