package pssim

import (
	"fmt"
	"strings"
)

// The parser knows the shape of the PowerShell hwk writes, not the whole
// language: statements on lines (joined by a trailing backtick or pipe,
// or by an open bracket), blocks in braces, the keywords if/elseif/else,
// foreach, function, try/catch/finally and switch. Anything else is a
// plain statement, read when it runs.

// stmt is one statement: a plain one (text), or a keyword with its
// condition and blocks.
type stmt struct {
	line int
	// kind is "", "if", "foreach", "function", "try", "switch".
	kind string
	text string // a plain statement; the function's name; switch's subject
	cond string // if/foreach/switch parentheses; function parameters
	body []stmt
	// elifs are an if's elseif conditions and blocks; els its else.
	elifs []elif
	els   []stmt
	// catch and finally of a try.
	catch, finally []stmt
	hasCatch       bool
	// cases of a switch: the label's text and its block.
	cases []switchCase
}

type elif struct {
	cond string
	body []stmt
}

type switchCase struct {
	label string
	body  []stmt
}

type parser struct {
	src  string
	pos  int
	line int
}

// parse reads a script into statements.
func parse(src string) ([]stmt, error) {
	p := &parser{src: strings.ReplaceAll(src, "\r\n", "\n"), line: 1}
	body, err := p.block(false)
	if err != nil {
		return nil, err
	}
	return body, nil
}

func (p *parser) errorf(format string, args ...any) error {
	return fmt.Errorf("line %d: %s", p.line, fmt.Sprintf(format, args...))
}

// skipSpace skips blanks, comments and, when newlines, line ends and
// semicolons.
func (p *parser) skipSpace(newlines bool) {
	for p.pos < len(p.src) {
		c := p.src[p.pos]
		switch {
		case c == ' ' || c == '\t' || c == '\r':
			p.pos++
		case c == '\n' || c == ';':
			if !newlines {
				return
			}
			if c == '\n' {
				p.line++
			}
			p.pos++
		case c == '`' && p.pos+1 < len(p.src) && p.src[p.pos+1] == '\n':
			p.pos += 2
			p.line++
		case strings.HasPrefix(p.src[p.pos:], "<#"):
			end := strings.Index(p.src[p.pos:], "#>")
			if end < 0 {
				p.pos = len(p.src)
				return
			}
			p.line += strings.Count(p.src[p.pos:p.pos+end], "\n")
			p.pos += end + 2
		case c == '#':
			for p.pos < len(p.src) && p.src[p.pos] != '\n' {
				p.pos++
			}
		default:
			return
		}
	}
}

// block reads statements up to the closing brace (inBraces) or the end.
func (p *parser) block(inBraces bool) ([]stmt, error) {
	var out []stmt
	for {
		p.skipSpace(true)
		if p.pos >= len(p.src) {
			if inBraces {
				return nil, p.errorf("a block is not closed")
			}
			return out, nil
		}
		if p.src[p.pos] == '}' {
			if !inBraces {
				return nil, p.errorf("a '}' closes no block")
			}
			p.pos++
			return out, nil
		}
		s, err := p.statement()
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
}

// keyword reports whether the source at the position starts with word
// followed by a non-word character.
func (p *parser) keyword(word string) bool {
	rest := p.src[p.pos:]
	if len(rest) < len(word) || !strings.EqualFold(rest[:len(word)], word) {
		return false
	}
	if len(rest) == len(word) {
		return true
	}
	c := rest[len(word)]
	return !(c == '-' || c == '_' || c == '\\' || c == '.' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9')
}

func (p *parser) statement() (stmt, error) {
	s := stmt{line: p.line}
	switch {
	case p.keyword("if"):
		p.pos += 2
		s.kind = "if"
		var err error
		if s.cond, s.body, err = p.condBlock(); err != nil {
			return s, err
		}
		for {
			save, saveLine := p.pos, p.line
			p.skipSpace(true)
			switch {
			case p.keyword("elseif"):
				p.pos += 6
				c, b, err := p.condBlock()
				if err != nil {
					return s, err
				}
				s.elifs = append(s.elifs, elif{c, b})
				continue
			case p.keyword("else"):
				p.pos += 4
				p.skipSpace(true)
				if s.els, err = p.openBlock(); err != nil {
					return s, err
				}
			default:
				p.pos, p.line = save, saveLine
			}
			return s, nil
		}
	case p.keyword("foreach"):
		p.pos += 7
		s.kind = "foreach"
		var err error
		s.cond, s.body, err = p.condBlock()
		return s, err
	case p.keyword("switch"):
		p.pos += 6
		s.kind = "switch"
		p.skipSpace(false)
		cond, err := p.parens()
		if err != nil {
			return s, err
		}
		s.cond = cond
		p.skipSpace(true)
		if p.pos >= len(p.src) || p.src[p.pos] != '{' {
			return s, p.errorf("switch without a block")
		}
		p.pos++
		for {
			p.skipSpace(true)
			if p.pos < len(p.src) && p.src[p.pos] == '}' {
				p.pos++
				return s, nil
			}
			start := p.pos
			for p.pos < len(p.src) && p.src[p.pos] != '{' && p.src[p.pos] != '\n' {
				p.pos++
			}
			label := strings.TrimSpace(p.src[start:p.pos])
			body, err := p.openBlock()
			if err != nil {
				return s, err
			}
			s.cases = append(s.cases, switchCase{label, body})
		}
	case p.keyword("function"):
		p.pos += 8
		s.kind = "function"
		p.skipSpace(false)
		start := p.pos
		for p.pos < len(p.src) && p.src[p.pos] != '(' && p.src[p.pos] != '{' && p.src[p.pos] != ' ' {
			p.pos++
		}
		s.text = p.src[start:p.pos]
		p.skipSpace(false)
		if p.pos < len(p.src) && p.src[p.pos] == '(' {
			params, err := p.parens()
			if err != nil {
				return s, err
			}
			s.cond = params
		}
		p.skipSpace(true)
		var err error
		s.body, err = p.openBlock()
		return s, err
	case p.keyword("try"):
		p.pos += 3
		s.kind = "try"
		p.skipSpace(true)
		var err error
		if s.body, err = p.openBlock(); err != nil {
			return s, err
		}
		save, saveLine := p.pos, p.line
		p.skipSpace(true)
		if p.keyword("catch") {
			p.pos += 5
			p.skipSpace(true)
			s.hasCatch = true
			if s.catch, err = p.openBlock(); err != nil {
				return s, err
			}
			save, saveLine = p.pos, p.line
			p.skipSpace(true)
		}
		if p.keyword("finally") {
			p.pos += 7
			p.skipSpace(true)
			if s.finally, err = p.openBlock(); err != nil {
				return s, err
			}
		} else {
			p.pos, p.line = save, saveLine
		}
		return s, nil
	}
	text, err := p.plain()
	s.text = text
	return s, err
}

// condBlock reads "(cond) { body }".
func (p *parser) condBlock() (string, []stmt, error) {
	p.skipSpace(false)
	cond, err := p.parens()
	if err != nil {
		return "", nil, err
	}
	p.skipSpace(true)
	body, err := p.openBlock()
	return cond, body, err
}

func (p *parser) openBlock() ([]stmt, error) {
	if p.pos >= len(p.src) || p.src[p.pos] != '{' {
		return nil, p.errorf("want a block in braces")
	}
	p.pos++
	return p.block(true)
}

// parens reads a parenthesized text and returns what is inside.
func (p *parser) parens() (string, error) {
	if p.pos >= len(p.src) || p.src[p.pos] != '(' {
		return "", p.errorf("want '('")
	}
	end, err := p.matching(p.pos)
	if err != nil {
		return "", err
	}
	inner := p.src[p.pos+1 : end]
	p.line += strings.Count(inner, "\n")
	p.pos = end + 1
	return inner, nil
}

// plain reads a plain statement: up to a line end or ';' outside
// brackets and strings, a line that ends in a backtick or a pipe going on.
func (p *parser) plain() (string, error) {
	var b strings.Builder
	for p.pos < len(p.src) {
		c := p.src[p.pos]
		switch {
		case c == '\'' || c == '"':
			end, err := skipString(p.src, p.pos)
			if err != nil {
				return "", p.errorf("%v", err)
			}
			b.WriteString(p.src[p.pos:end])
			p.line += strings.Count(p.src[p.pos:end], "\n")
			p.pos = end
		case c == '(' || c == '{' || c == '[':
			end, err := p.matching(p.pos)
			if err != nil {
				return "", err
			}
			b.WriteString(p.src[p.pos : end+1])
			p.line += strings.Count(p.src[p.pos:end], "\n")
			p.pos = end + 1
		case c == '`' && p.pos+1 < len(p.src) && p.src[p.pos+1] == '\n':
			b.WriteByte(' ')
			p.pos += 2
			p.line++
		case c == '#' && (p.pos == 0 || p.src[p.pos-1] == ' ' || p.src[p.pos-1] == '\t'):
			for p.pos < len(p.src) && p.src[p.pos] != '\n' {
				p.pos++
			}
		case c == '\n' || c == ';' || c == '}':
			text := strings.TrimSpace(b.String())
			if c == '\n' && strings.HasSuffix(text, "|") {
				b.WriteByte(' ')
				p.pos++
				p.line++
				continue
			}
			return text, nil
		default:
			b.WriteByte(c)
			p.pos++
		}
	}
	return strings.TrimSpace(b.String()), nil
}

// matching is the position of the bracket that closes the one at i.
func (p *parser) matching(i int) (int, error) {
	end, err := matchBracket(p.src, i)
	if err != nil {
		return 0, p.errorf("%v", err)
	}
	return end, nil
}

// skipString returns the position after the string literal at i.
func skipString(s string, i int) (int, error) {
	q := s[i]
	for j := i + 1; j < len(s); j++ {
		switch {
		case q == '"' && s[j] == '`':
			j++
		case q == '"' && s[j] == '$' && j+1 < len(s) && s[j+1] == '(':
			end, err := matchBracket(s, j+1)
			if err != nil {
				return 0, err
			}
			j = end
		case s[j] == q:
			if j+1 < len(s) && s[j+1] == q {
				j++
				continue
			}
			return j + 1, nil
		}
	}
	return 0, fmt.Errorf("a string is not closed")
}

// matchBracket is the position of the bracket that closes the one at i,
// skipping strings and nested brackets.
func matchBracket(s string, i int) (int, error) {
	closer := map[byte]byte{'(': ')', '{': '}', '[': ']'}
	var stack []byte
	for j := i; j < len(s); j++ {
		c := s[j]
		switch {
		case c == '\'' || c == '"':
			end, err := skipString(s, j)
			if err != nil {
				return 0, err
			}
			j = end - 1
		case c == '#' && j > 0 && (s[j-1] == ' ' || s[j-1] == '\n' || s[j-1] == '\t') && (len(stack) == 0 || stack[len(stack)-1] == '}'):
			for j < len(s) && s[j] != '\n' {
				j++
			}
			j--
		case closer[c] != 0:
			stack = append(stack, closer[c])
		case c == ')' || c == '}' || c == ']':
			if len(stack) == 0 || stack[len(stack)-1] != c {
				return 0, fmt.Errorf("%q does not match", c)
			}
			stack = stack[:len(stack)-1]
			if len(stack) == 0 {
				return j, nil
			}
		}
	}
	return 0, fmt.Errorf("%q is not closed", s[i])
}

// eachTop calls fn with each position of s outside strings and brackets.
func eachTop(s string, fn func(i int)) {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\'' || c == '"':
			if end, err := skipString(s, i); err == nil {
				i = end - 1
			}
		case c == '(' || c == '{' || c == '[':
			if end, err := matchBracket(s, i); err == nil {
				i = end
			}
		default:
			fn(i)
		}
	}
}

// splitTop splits s at sep where it is outside strings and brackets.
func splitTop(s string, sep byte) []string {
	var parts []string
	start := 0
	eachTop(s, func(i int) {
		if s[i] == sep {
			parts = append(parts, s[start:i])
			start = i + 1
		}
	})
	return append(parts, s[start:])
}
