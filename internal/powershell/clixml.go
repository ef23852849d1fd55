package powershell

import (
	"bytes"
	"html"
	"io"
	"regexp"
	"strconv"
	"strings"
)

// clixmlMark starts what Windows PowerShell writes to a redirected stderr
// when it runs an -EncodedCommand non-interactively: its error, warning,
// verbose and debug lines as <S S="Error">…</S> elements and its progress
// as <Obj S="progress">…</Obj>, in one <Objs> document (ConsoleHost's
// ErrorFormat is XML then, and 5.1 has no switch to turn it off).
const clixmlMark = "#< CLIXML"

var (
	clixmlEscape   = regexp.MustCompile(`_x([0-9A-Fa-f]{4})_`)
	scriptPosition = regexp.MustCompile(`^(At line:\d+ char:\d+|At .+:\d+ char:\d+)$`)
)

// NewCLIXMLWriter returns a writer that passes text on to w, with each CLIXML
// document in it written as the lines it holds (progress records
// dropped), as each element is whole. Close writes what is left.
func NewCLIXMLWriter(w io.Writer) io.WriteCloser { return &clixmlWriter{w: w} }

type clixmlWriter struct {
	w     io.Writer
	buf   []byte
	inDoc bool
	err   error
}

func (c *clixmlWriter) Write(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	c.buf = append(c.buf, p...)
	c.drain(false)
	if c.err != nil {
		return 0, c.err
	}
	return len(p), nil
}

// Close writes out what is left: the text of a document cut short, or
// text that might have begun a document.
func (c *clixmlWriter) Close() error {
	c.drain(true)
	if c.inDoc {
		c.buf = nil
	}
	c.emit(c.buf)
	c.buf = nil
	return c.err
}

func (c *clixmlWriter) emit(b []byte) {
	if c.err == nil && len(b) > 0 {
		_, c.err = c.w.Write(b)
	}
}

// drain writes what of the buffer is decided; at the end (last) a
// partial mark is text.
func (c *clixmlWriter) drain(last bool) {
	for c.err == nil && len(c.buf) > 0 {
		if !c.inDoc {
			i := bytes.Index(c.buf, []byte(clixmlMark))
			if i < 0 {
				keep := 0
				if !last {
					keep = partialSuffix(c.buf, clixmlMark)
				}
				c.emit(c.buf[:len(c.buf)-keep])
				c.buf = c.buf[len(c.buf)-keep:]
				return
			}
			c.emit(c.buf[:i])
			c.buf, c.inDoc = c.buf[i+len(clixmlMark):], true
			continue
		}
		c.buf = bytes.TrimLeft(c.buf, "\r\n \t")
		if len(c.buf) == 0 {
			return
		}
		n, text, ok := element(c.buf)
		if !ok {
			return // the element goes on in a later write
		}
		if n < 0 {
			c.buf, c.inDoc = c.buf[-n:], false
			continue
		}
		c.emit([]byte(text))
		c.buf = c.buf[n:]
	}
}

// element reads the document's next element from b: its length and its
// text (an <S> element's; nothing for others), ok false when it is not
// whole yet. The end of the document comes back as a negative length.
func element(b []byte) (n int, text string, ok bool) {
	switch {
	case bytes.HasPrefix(b, []byte("</Objs>")):
		return -len("</Objs>"), "", true
	case bytes.HasPrefix(b, []byte("<S ")):
		open := bytes.IndexByte(b, '>')
		end := bytes.Index(b, []byte("</S>"))
		if open < 0 || end < 0 {
			return 0, "", false
		}
		return end + len("</S>"), unescape(string(b[open+1 : end])), true
	case bytes.HasPrefix(b, []byte("<Obj ")) || bytes.HasPrefix(b, []byte("<Obj>")):
		depth := 0
		for i := 0; i < len(b); i++ {
			switch {
			case bytes.HasPrefix(b[i:], []byte("<Obj ")), bytes.HasPrefix(b[i:], []byte("<Obj>")):
				depth++
			case bytes.HasPrefix(b[i:], []byte("</Obj>")):
				if depth--; depth == 0 {
					return i + len("</Obj>"), "", true
				}
			}
		}
		return 0, "", false
	case b[0] == '<':
		// <Objs ...>, or an element hwk does not read: skipped.
		i := bytes.IndexByte(b, '>')
		if i < 0 {
			return 0, "", false
		}
		return i + 1, "", true
	default:
		// Not XML: another program's text, up to the next element.
		i := bytes.IndexByte(b, '<')
		if i < 0 {
			i = len(b)
		}
		return i, string(b[:i]), true
	}
}

// partialSuffix returns the length of the longest end of b that begins mark.
func partialSuffix(b []byte, mark string) int {
	for k := min(len(mark)-1, len(b)); k > 0; k-- {
		if bytes.HasSuffix(b, []byte(mark[:k])) {
			return k
		}
	}
	return 0
}

// unescape undoes XML's entities and CLIXML's _xHHHH_ escapes of
// characters XML cannot hold (line ends, escape characters; a literal
// "_x" is itself written _x005F_x).
func unescape(s string) string {
	s = clixmlEscape.ReplaceAllStringFunc(s, func(m string) string {
		r, err := strconv.ParseUint(m[2:6], 16, 16)
		if err != nil {
			return m
		}
		return string(rune(r))
	})
	return html.UnescapeString(s)
}

// DecodeCLIXML returns stderr as text: each CLIXML document in it as the lines
// it holds, progress records dropped, what is not CLIXML as it is, and
// line ends as "\n"; stderr without CLIXML comes back as it is. A stderr
// cut at the front (the end of a long one) decodes from its first whole
// element.
func DecodeCLIXML(stderr string) string {
	first := strings.Index(stderr, `<S S="`)
	mark := strings.Index(stderr, clixmlMark)
	if first < 0 && mark < 0 {
		return stderr
	}
	var b strings.Builder
	w := &clixmlWriter{w: &b}
	if first >= 0 && (mark < 0 || first < mark) {
		stderr, w.inDoc = stderr[first:], true
	}
	_, _ = io.WriteString(w, stderr)
	_ = w.Close()
	return strings.ReplaceAll(b.String(), "\r\n", "\n")
}

// ErrorText returns what a failed PowerShell run wrote to stderr, for a
// message: CLIXML decoded, and of each error record only its message (the
// script position, the code line with its underline, CategoryInfo and
// FullyQualifiedErrorId dropped), without blank lines.
func ErrorText(stderr string) string {
	var keep []string
	for line := range strings.SplitSeq(DecodeCLIXML(stderr), "\n") {
		t := strings.TrimSpace(line)
		switch {
		case t == "", scriptPosition.MatchString(t), strings.HasPrefix(t, "+ "), t == "+":
			continue
		}
		keep = append(keep, strings.TrimRight(line, " \r"))
	}
	return strings.Join(keep, "\n")
}
