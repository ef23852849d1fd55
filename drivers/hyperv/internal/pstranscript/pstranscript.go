// Package pstranscript holds what the Hyper-V driver's tests answer in
// place of PowerShell: replies in the exact form the session receives
// them, each file citing where its format comes from, and rules that say
// which script gets which reply. Both the in-process fake and the fake
// powershell.exe program answer from it, so a script no rule expects
// fails there too.
package pstranscript

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// Replies are reply texts by "file/name" (file without .txt): the JSON
// a script's output becomes (the out of the session's result line).
type Replies map[string]json.RawMessage

// LoadReplies reads every .txt file in dir. A file is comment lines (#),
// at least one of them a "Source:" line citing the format, then sections
// each headed "== name ==" and holding one JSON value.
func LoadReplies(dir string) (Replies, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.txt"))
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no reply files in %s", dir)
	}
	out := Replies{}
	for _, f := range files {
		if err := out.parse(f); err != nil {
			return nil, err
		}
	}
	return out, nil
}

var section = regexp.MustCompile(`^== ([\w.-]+) ==$`)

func (r Replies) parse(path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	file := strings.TrimSuffix(filepath.Base(path), ".txt")
	sourced := false
	name := ""
	var body bytes.Buffer
	flush := func() error {
		if name == "" {
			return nil
		}
		raw := bytes.TrimSpace(body.Bytes())
		if !json.Valid(raw) {
			return fmt.Errorf("%s: reply %s is not JSON: %s", path, name, raw)
		}
		key := file + "/" + name
		if _, dup := r[key]; dup {
			return fmt.Errorf("%s: reply %s twice", path, name)
		}
		r[key] = append(json.RawMessage(nil), raw...)
		body.Reset()
		return nil
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "#"):
			if name == "" && strings.Contains(line, "Source:") {
				sourced = true
			}
		case section.MatchString(line):
			if err := flush(); err != nil {
				return err
			}
			name = section.FindStringSubmatch(line)[1]
		case name == "" && strings.TrimSpace(line) != "":
			return fmt.Errorf("%s: %q before the first section", path, line)
		default:
			body.WriteString(line + "\n")
		}
	}
	if err := flush(); err != nil {
		return err
	}
	if !sourced {
		return fmt.Errorf("%s cites no source for its format (a \"# Source:\" line before the first reply)", path)
	}
	return sc.Err()
}

// Get is the reply called key.
func (r Replies) Get(key string) (json.RawMessage, error) {
	raw, ok := r[key]
	if !ok {
		return nil, fmt.Errorf("no reply %q in the transcripts", key)
	}
	return raw, nil
}

// Rule answers the scripts that contain every string in Match with the
// reply Reply ("" is a script that writes nothing, whose output is null),
// or with the error record Error. When names state the rule holds only
// while that state is set; Set and Clear change the state after it
// answers. Times, when above zero, is how often it may answer. Only the
// fake program heeds Stderr, text it writes to its stderr before it
// answers, and Exit, which makes it exit in the middle of its reply, as a
// PowerShell that crashes or is killed does.
type Rule struct {
	Name   string   `json:"name"`
	Match  []string `json:"match"`
	Reply  string   `json:"reply,omitempty"`
	Error  *PSError `json:"error,omitempty"`
	When   []string `json:"when,omitempty"`
	Not    []string `json:"not,omitempty"`
	Set    []string `json:"set,omitempty"`
	Clear  []string `json:"clear,omitempty"`
	Times  int      `json:"times,omitempty"`
	Stderr string   `json:"stderr,omitempty"`
	Exit   bool     `json:"exit,omitempty"`
	// Source cites where Stderr's text comes from (replies cite theirs
	// in their files).
	Source string `json:"source,omitempty"`
}

// PSError is an error record as the session's catch block writes it: the
// fields of hyperv.PSError, which this package cannot name (hyperv's own
// tests import it).
type PSError struct {
	Message   string `json:"message"`
	ID        string `json:"id"`
	Category  string `json:"category"`
	Exception string `json:"exception"`
	Target    string `json:"target"`
}

// Transcript is rules and the state they share.
type Transcript struct {
	Rules []Rule `json:"rules"`
	// State is the names set so far; Used counts each rule's answers.
	State []string       `json:"state"`
	Used  map[string]int `json:"used"`
}

// Answer finds the first rule for script, applies its state changes and
// returns it; false when no rule expects the script.
func (t *Transcript) Answer(script string) (Rule, bool) {
	if t.Used == nil {
		t.Used = map[string]int{}
	}
	for _, r := range t.Rules {
		if !t.applies(r, script) {
			continue
		}
		t.Used[r.Name]++
		for _, s := range r.Set {
			if !slices.Contains(t.State, s) {
				t.State = append(t.State, s)
			}
		}
		t.State = slices.DeleteFunc(t.State, func(s string) bool { return slices.Contains(r.Clear, s) })
		return r, true
	}
	return Rule{}, false
}

func (t *Transcript) applies(r Rule, script string) bool {
	for _, m := range r.Match {
		if !strings.Contains(script, m) {
			return false
		}
	}
	for _, w := range r.When {
		if !slices.Contains(t.State, w) {
			return false
		}
	}
	for _, n := range r.Not {
		if slices.Contains(t.State, n) {
			return false
		}
	}
	return r.Times == 0 || t.Used[r.Name] < r.Times
}
