package imagearchive

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"github.com/distribution/reference"
)

// blobDigest returns the digest an OCI layout's blobs/ALG/HEX path names.
func blobDigest(name string) (string, bool) {
	parts := strings.Split(name, "/")
	if len(parts) != 3 || parts[0] != "blobs" || parts[1] != "sha256" || len(parts[2]) != 64 {
		return "", false
	}
	if _, err := hex.DecodeString(parts[2]); err != nil {
		return "", false
	}
	return "sha256:" + parts[2], true
}

// validDigest reports whether s is an OCI digest: algorithm:encoded, and for
// sha256 the 64 hex digits of one.
func validDigest(s string) bool {
	alg, enc, ok := strings.Cut(s, ":")
	if !ok || alg == "" || enc == "" {
		return false
	}
	for _, c := range alg {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || strings.ContainsRune("+._-", c)) {
			return false
		}
	}
	for _, c := range enc {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("=_-", c)) {
			return false
		}
	}
	if alg == "sha256" {
		_, err := hex.DecodeString(enc)
		return len(enc) == 64 && err == nil && strings.ToLower(enc) == enc
	}
	return true
}

func digestOf(b []byte) string {
	s := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(s[:])
}

// refFromAnnotations returns the full name an index entry gives its image:
// containerd's annotation, else OCI's when it is a whole reference rather
// than only a tag.
func refFromAnnotations(ann map[string]string) string {
	for _, k := range []string{annotationName, annotationRefName} {
		v := ann[k]
		if v == "" || (k == annotationRefName && !strings.ContainsAny(v, "/:@")) {
			continue
		}
		if ref, err := normalizeRef(v); err == nil {
			return ref
		}
	}
	return ""
}

// normalizeRef spells a name the way containerd stores it:
// busybox becomes docker.io/library/busybox:latest.
func normalizeRef(s string) (string, error) {
	named, err := reference.ParseNormalizedNamed(s)
	if err != nil {
		return "", err
	}
	return reference.TagNameOnly(named).String(), nil
}

// NormalizeRef exports normalizeRef for callers outside: the name containerd
// and crictl will show for s.
func NormalizeRef(s string) (string, error) { return normalizeRef(s) }

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func tagOf(ref string) string {
	named, err := reference.ParseNormalizedNamed(ref)
	if err != nil {
		return ref
	}
	if t, ok := named.(reference.Tagged); ok {
		return t.Tag()
	}
	return ref
}

func blobName(d string) string { return "blobs/sha256/" + strings.TrimPrefix(d, "sha256:") }
