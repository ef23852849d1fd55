package nodeimage

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// updateNameRE is an update package's file name hwk takes: the Microsoft
// Update Catalog's names (windows10.0-kb5044281-x64_<hash>.msu) and
// anything else of letters, digits and ._+- with no spaces, which pass
// through the build disk, build.json and DISM's command line unquoted
// and unchanged.
var updateNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._+-]*\.(?i:msu|cab)$`)

// updateFiles lists the update packages (.msu, .cab) in dir, in the
// order they are installed: by file name, case ignored, as Windows sorts
// them. Servicing stack updates come inside Windows Server 2022's
// cumulative updates since 2021, so its latest cumulative update alone
// is enough; a separate servicing stack update must be named so that it
// sorts first. Other files in dir are left out; a directory with no
// package, or a package whose name hwk cannot pass on, is an error
// that says the fix.
func updateFiles(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("--updates %s: %w (name a directory holding the .msu files from the Microsoft Update Catalog)", dir, err)
	}
	var out []string
	seen := map[string]string{}
	for _, e := range entries {
		ext := strings.ToLower(filepath.Ext(e.Name()))
		if e.IsDir() || (ext != ".msu" && ext != ".cab") {
			continue
		}
		if !updateNameRE.MatchString(e.Name()) {
			return nil, fmt.Errorf("--updates: %q is not a name hwk can pass to DISM: rename it to letters, digits and . _ + - only, no spaces (the Update Catalog's own names, such as windows10.0-kb5044281-x64.msu, are fine)", e.Name())
		}
		lower := strings.ToLower(e.Name())
		if other, ok := seen[lower]; ok {
			return nil, fmt.Errorf("--updates: %s and %s are the same name to Windows; keep one", other, e.Name())
		}
		seen[lower] = e.Name()
		out = append(out, filepath.Join(dir, e.Name()))
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("--updates %s holds no .msu or .cab file: download the latest cumulative update for the Windows Server release (for 2022: \"Cumulative Update for Microsoft server operating system version 21H2 for x64-based Systems\") from https://www.catalog.update.microsoft.com into it", dir)
	}
	slices.SortFunc(out, func(a, b string) int {
		return strings.Compare(strings.ToLower(filepath.Base(a)), strings.ToLower(filepath.Base(b)))
	})
	return out, nil
}
