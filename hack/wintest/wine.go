package main

// wineFailure is a test that fails under Wine for a reason of Wine's, not
// of Windows' or of hwk's: the Wine bug, or what Wine does differently,
// with what shows it.
type wineFailure struct {
	Package string // relative to the module, as in the table
	Test    string // a top-level test function
	Why     string
}

// wineFailures is the Wine list. Every entry is reported when it fails,
// and is an error when it passes (take it off then).
var wineFailures = []wineFailure{}
