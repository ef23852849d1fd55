package powershell

import (
	"os"
	"strings"
	"testing"
)

// thrown returns testdata/throw.clixml's stderr (after its header).
func thrown(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("testdata/throw.clixml")
	if err != nil {
		t.Fatal(err)
	}
	_, doc, ok := strings.Cut(string(b), "\n--\n")
	if !ok || !strings.HasPrefix(doc, "#< CLIXML\r\n<Objs ") {
		t.Fatalf("testdata/throw.clixml holds no CLIXML after its header")
	}
	return doc
}

const thrownMessage = `the service was restarted once
containerd did not start within 60 s; its log (C:\ProgramData\containerd\root\containerd.log) ends with <fatal>
& the service stays Stopped`

func TestDecodeCLIXML(t *testing.T) {
	got := DecodeCLIXML(thrown(t))
	for _, want := range []string{
		"the service was restarted once\n",
		"ends with <fatal> \n& the service stays Stopped\nAt line:12 char:5\n",
		"    + FullyQualifiedErrorId : containerd did not start",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("decoded stderr lacks %q:\n%s", want, got)
		}
	}
	for _, bad := range []string{"CLIXML", "<Obj", "<S ", "Preparing modules", "_x000", "&lt;", "\r"} {
		if strings.Contains(got, bad) {
			t.Errorf("decoded stderr holds %q:\n%s", bad, got)
		}
	}
}

func TestErrorText(t *testing.T) {
	if got := ErrorText(thrown(t)); got != thrownMessage {
		t.Errorf("ErrorText =\n%s\nwant\n%s", got, thrownMessage)
	}
	// The end of a long stderr (a tail buffer's) starts inside the
	// document: it decodes from its first whole element.
	doc := thrown(t)
	cut := doc[strings.Index(doc, "restarted once")-20:]
	if got, want := ErrorText(cut), strings.TrimPrefix(thrownMessage, "the service was restarted once\n"); got != want {
		t.Errorf("ErrorText of the end =\n%s\nwant\n%s", got, want)
	}
	// Plain text, as a terminal gets it, loses only the position lines.
	plain := "containerd did not start\r\nAt line:12 char:5\r\n+     throw \"containerd did not start\"\r\n+     ~~~~~\r\n    + CategoryInfo          : OperationStopped: (:) [], RuntimeException\r\n"
	if got := ErrorText(plain); got != "containerd did not start" {
		t.Errorf("ErrorText of text = %q", got)
	}
	// A script file's position.
	if got := ErrorText("boom\nAt C:\\hwk\\seed.ps1:3 char:1\n+ throw 'boom'\n"); got != "boom" {
		t.Errorf("ErrorText = %q", got)
	}
}

func TestDecodeCLIXMLKeepsOtherText(t *testing.T) {
	if s := "Warning: Permanently added '172.31.250.11' (ED25519)\r\n"; DecodeCLIXML(s) != s {
		t.Errorf("text without CLIXML changed: %q", DecodeCLIXML(s))
	}
	doc := `#< CLIXML` + "\r\n" + `<Objs Version="1.1.0.1" xmlns="http://schemas.microsoft.com/powershell/2004/04"><S S="Error">one_x005F_x000A_ &amp;_x000D__x000A_</S></Objs>`
	got := DecodeCLIXML("ssh said this\n" + doc + "between\n" + doc)
	if want := "ssh said this\none_x000A_ &\nbetween\none_x000A_ &\n"; got != want {
		t.Errorf("DecodeCLIXML = %q, want %q", got, want)
	}
}

// TestCLIXMLWriter checks that a stream decodes the same however it is
// split, text around documents passes as it is, and Close writes out a
// held-back "#<" that began no document.
func TestCLIXMLWriter(t *testing.T) {
	stream := "kubeadm: [preflight] Running pre-flight checks\r\n" + thrown(t) + "kubeadm: done\r\n#<"
	var whole strings.Builder
	w := NewCLIXMLWriter(&whole)
	if _, err := w.Write([]byte(stream)); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	var bytewise strings.Builder
	w = NewCLIXMLWriter(&bytewise)
	for i := range len(stream) {
		if _, err := w.Write([]byte{stream[i]}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if whole.String() != bytewise.String() {
		t.Errorf("split writes gave\n%q\nwhole ones\n%q", bytewise.String(), whole.String())
	}
	got := whole.String()
	if !strings.HasPrefix(got, "kubeadm: [preflight] Running pre-flight checks\r\nthe service was restarted once\r\ncontainerd did not start") ||
		!strings.HasSuffix(got, "FullyQualifiedErrorId : containerd did not start within 60 s; its log (C:\\ProgramData\\containerd\\root\\containerd.log) ends with <fatal> & the service stays Stopped\r\n \r\nkubeadm: done\r\n#<") {
		t.Errorf("decoded stream:\n%q", got)
	}
	if got != strings.ReplaceAll(DecodeCLIXML(stream), "\n", "\r\n") {
		t.Errorf("the writer and DecodeCLIXML differ:\n%q\n%q", got, DecodeCLIXML(stream))
	}
}
