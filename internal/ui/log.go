package ui

import (
	"io"
	"log/slog"
)

// NewLogger returns the logger behind -v: warnings and errors by default, info
// at -v 1, debug at -v 2, debug with source positions from -v 3.
func NewLogger(w io.Writer, verbosity int) *slog.Logger {
	level := slog.LevelWarn
	switch {
	case verbosity >= 2:
		level = slog.LevelDebug
	case verbosity == 1:
		level = slog.LevelInfo
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{
		Level:     level,
		AddSource: verbosity >= 3,
	}))
}
