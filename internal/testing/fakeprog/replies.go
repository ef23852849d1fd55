package fakeprog

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf16"
)

// Reply is what a program writes for one request and how it exits.
type Reply struct {
	Stdout string `json:"stdout,omitempty"`
	Stderr string `json:"stderr,omitempty"`
	Exit   int    `json:"exit,omitempty"`
	// UTF16 has stdout and stderr written as UTF-16LE, without a BOM
	// (as wsl.exe writes its own messages).
	UTF16 bool `json:"utf16,omitempty"`
}

// Encode is s as the reply writes it: UTF-16LE when r.UTF16 says so,
// else its bytes.
func (r Reply) Encode(s string) []byte {
	if !r.UTF16 {
		return []byte(s)
	}
	u := utf16.Encode([]rune(s))
	b := make([]byte, 0, 2*len(u))
	for _, c := range u {
		b = append(b, byte(c), byte(c>>8))
	}
	return b
}

// Replies are replies by "file/section" (file without .txt).
type Replies map[string]Reply

// LoadReplies reads every .txt file in dir. A file is comment lines (#),
// at least one of them a "Source:" line citing the format, then sections
// each headed "== name ==": standard output, then optionally a line
// "--- stderr" and standard error, "--- exit N", and "--- utf-16le" for a
// reply the program writes in UTF-16LE (wsl.exe's own messages). Lines
// end in CRLF where the file's "# Newlines: crlf" says so. A line
// starting with # is a comment wherever it is (a note on the next
// section), so no reply's output has a line starting with #.
func LoadReplies(dir string) (Replies, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.txt"))
	if err != nil || len(files) == 0 {
		return nil, fmt.Errorf("no reply files in %s (%v)", dir, err)
	}
	out := Replies{}
	for _, f := range files {
		if err := out.parse(f); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// WithPrefix is every reply whose key starts with prefix, in key order
// (the seeds of a fuzz target, say).
func (rs Replies) WithPrefix(prefix string) []Reply {
	var keys []string
	for k := range rs {
		if strings.HasPrefix(k, prefix) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	out := make([]Reply, len(keys))
	for i, k := range keys {
		out[i] = rs[k]
	}
	return out
}

// JSON is the reply called key as the one JSON value its output holds
// (a PowerShell session's result, say).
func (rs Replies) JSON(key string) (json.RawMessage, error) {
	r, ok := rs[key]
	if !ok {
		return nil, fmt.Errorf("no reply %q in the reply files", key)
	}
	raw := bytes.TrimSpace([]byte(r.Stdout))
	if !json.Valid(raw) {
		return nil, fmt.Errorf("reply %s is not JSON: %s", key, raw)
	}
	return raw, nil
}

var sectionRE = regexp.MustCompile(`^== ([\w.-]+) ==$`)

func (rs Replies) parse(path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	file := strings.TrimSuffix(filepath.Base(path), ".txt")
	sourced := false
	name, part := "", "stdout"
	var rep Reply
	var out, errb strings.Builder
	flush := func() {
		if name == "" {
			return
		}
		rep.Stdout, rep.Stderr = out.String(), errb.String()
		rs[file+"/"+name] = rep
		rep = Reply{}
		out.Reset()
		errb.Reset()
	}
	eol := "\n"
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "#"):
			if name == "" && strings.Contains(line, "Source:") {
				sourced = true
			}
			if name == "" && strings.TrimSpace(line) == "# Newlines: crlf" {
				eol = "\r\n"
			}
		case sectionRE.MatchString(line):
			flush()
			name, part = sectionRE.FindStringSubmatch(line)[1], "stdout"
			if _, dup := rs[file+"/"+name]; dup {
				return fmt.Errorf("%s: reply %s twice", path, name)
			}
		case name == "" && strings.TrimSpace(line) != "":
			return fmt.Errorf("%s: %q before the first section", path, line)
		case line == "--- stderr":
			part = "stderr"
		case line == "--- utf-16le":
			rep.UTF16 = true
		case strings.HasPrefix(line, "--- exit "):
			code, err := strconv.Atoi(strings.TrimPrefix(line, "--- exit "))
			if err != nil {
				return fmt.Errorf("%s: %q", path, line)
			}
			rep.Exit = code
		case name == "":
		case part == "stderr":
			errb.WriteString(line + eol)
		default:
			out.WriteString(line + eol)
		}
	}
	flush()
	if !sourced {
		return fmt.Errorf("%s cites no source for its format (a \"# Source:\" line before the first reply)", path)
	}
	return sc.Err()
}
