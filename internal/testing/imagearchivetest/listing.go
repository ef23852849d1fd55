package imagearchivetest

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"strings"
)

// A listing is a tar archive written as text, so that a fuzzer's
// mutations reach the JSON inside while the tar's checksums and the
// blobs' digests still hold. After a magic first line, each entry starts
// with "== NAME" (a file: the lines up to the next entry are its content;
// an "@" in NAME stands for the content's SHA-256), "=d NAME" (a
// directory), "=s NAME TARGET" (a symbolic link) or "=h NAME TARGET" (a
// hard link).

// FromListing is the tar that data lists after magic; data that does not
// start with magic is taken as a tar already.
func FromListing(magic string, data []byte) []byte {
	rest, ok := bytes.CutPrefix(data, []byte(magic))
	if !ok {
		return data
	}
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	var name string
	var content []string
	inFile := false
	flush := func() {
		if !inFile {
			return
		}
		body := []byte(strings.Join(content, "\n"))
		sum := sha256.Sum256(body)
		n := strings.ReplaceAll(name, "@", hex.EncodeToString(sum[:]))
		_ = tw.WriteHeader(&tar.Header{Name: n, Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg, Format: tar.FormatPAX})
		_, _ = tw.Write(body)
		inFile, content = false, nil
	}
	for _, line := range strings.Split(string(rest), "\n") {
		switch {
		case strings.HasPrefix(line, "== "):
			flush()
			name, inFile = line[3:], true
		case strings.HasPrefix(line, "=d "):
			flush()
			_ = tw.WriteHeader(&tar.Header{Name: line[3:], Mode: 0o755, Typeflag: tar.TypeDir, Format: tar.FormatPAX})
		case strings.HasPrefix(line, "=s "), strings.HasPrefix(line, "=h "):
			flush()
			n, target, _ := strings.Cut(line[3:], " ")
			typ := byte(tar.TypeSymlink)
			if line[1] == 'h' {
				typ = tar.TypeLink
			}
			_ = tw.WriteHeader(&tar.Header{Name: n, Linkname: target, Mode: 0o777, Typeflag: typ, Format: tar.FormatPAX})
		case inFile:
			content = append(content, line)
		}
	}
	flush()
	_ = tw.Close()
	return b.Bytes()
}

// Listing is the listing of the tar archive b, after magic (for seeds); a
// file for which blob says true is named blobs/sha256/@.
func Listing(magic string, b []byte, blob func(name string) bool) ([]byte, error) {
	var entries []string
	tr := tar.NewReader(bytes.NewReader(b))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			// The newline before a line that starts an entry is not
			// content.
			return []byte(magic + strings.Join(entries, "\n")), nil
		}
		if err != nil {
			return nil, err
		}
		switch h.Typeflag {
		case tar.TypeDir:
			entries = append(entries, "=d "+h.Name)
		case tar.TypeSymlink:
			entries = append(entries, "=s "+h.Name+" "+h.Linkname)
		case tar.TypeLink:
			entries = append(entries, "=h "+h.Name+" "+h.Linkname)
		case tar.TypeReg:
			data, err := io.ReadAll(tr)
			if err != nil {
				return nil, err
			}
			name := h.Name
			if blob(name) {
				name = "blobs/sha256/@"
			}
			entries = append(entries, "== "+name+"\n"+string(data))
		}
	}
}
