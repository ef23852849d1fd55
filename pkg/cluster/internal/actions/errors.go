package actions

import (
	"errors"
	"strings"
)

// joinErrors returns errors.Join without the nils, and nil when all are.
func joinErrors(errs []error) error {
	var out []error
	for _, e := range errs {
		if e != nil {
			out = append(out, e)
		}
	}
	return errors.Join(out...)
}

// withLog adds the end of a command's log, and where the whole log is, to
// err.
func withLog(err error, title, lines, path string) error {
	lines = strings.TrimSpace(lines)
	if lines == "" {
		return err
	}
	msg := "\n  " + title + ":\n" + indent(lines, "    ")
	if path != "" {
		msg += "\n  full log: " + path
	}
	return &detailError{err: err, detail: msg}
}

type detailError struct {
	err    error
	detail string
}

func (e *detailError) Error() string { return e.err.Error() + e.detail }
func (e *detailError) Unwrap() error { return e.err }

func indent(s, pad string) string {
	return pad + strings.ReplaceAll(s, "\n", "\n"+pad)
}
