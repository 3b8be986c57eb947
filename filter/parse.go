package filter

import (
	"errors"
	"fmt"
	"strings"
)

// ErrSyntax is wrapped by the errors of Parse.
var ErrSyntax = errors.New("filter: syntax error")

// maxDepth bounds the nesting of parentheses Parse accepts.
const maxDepth = 1000

// Parse parses the subset of OData that [Expr.String] writes: comparisons of a property with
// a string literal (Property op 'value', with each quote inside the value doubled), joined by and
// and or (and binding tighter), and parentheses. Keywords and operators are lower case;
// spaces and tabs may surround any token. The empty string (or only spaces) gives the empty
// Expr. Anything else, such as not, numbers, other literal types, functions or an invalid
// property name, is an error wrapping [ErrSyntax].
//
// For every e, Parse(e.String()) returns an Expr equal to e.
func Parse(s string) (Expr, error) {
	p := parser{s: s}
	p.space()
	if p.i == len(s) {
		return Expr{}, nil
	}
	e, err := p.or()
	if err != nil {
		return Expr{}, err
	}
	if p.i < len(s) {
		return Expr{}, p.errorf("unexpected %q", p.rest())
	}
	return e, nil
}

type parser struct {
	s     string
	i     int
	depth int
}

func (p *parser) errorf(format string, args ...any) error {
	return fmt.Errorf("%w at offset %d: %s", ErrSyntax, p.i, fmt.Sprintf(format, args...))
}

// rest returns a short piece of the input at the current offset, for error messages.
func (p *parser) rest() string {
	r := p.s[p.i:]
	if len(r) > 20 {
		r = r[:20] + "..."
	}
	return r
}

func (p *parser) space() {
	for p.i < len(p.s) && (p.s[p.i] == ' ' || p.s[p.i] == '\t') {
		p.i++
	}
}

// word returns the identifier-like token at the current offset (maybe "") and skips the
// spaces after it.
func (p *parser) word() string {
	j := p.i
	for p.i < len(p.s) && isIdent(p.s[p.i]) {
		p.i++
	}
	w := p.s[j:p.i]
	p.space()
	return w
}

// keyword consumes the word kw if it is next.
func (p *parser) keyword(kw string) bool {
	if !strings.HasPrefix(p.s[p.i:], kw) || p.i+len(kw) < len(p.s) && isIdent(p.s[p.i+len(kw)]) {
		return false
	}
	p.i += len(kw)
	p.space()
	return true
}

// or parses and-expressions joined by or.
func (p *parser) or() (Expr, error) {
	var es []Expr
	for {
		e, err := p.and()
		if err != nil {
			return Expr{}, err
		}
		es = append(es, e)
		if !p.keyword("or") {
			return Or(es...), nil
		}
	}
}

// and parses primaries joined by and.
func (p *parser) and() (Expr, error) {
	var es []Expr
	for {
		e, err := p.primary()
		if err != nil {
			return Expr{}, err
		}
		es = append(es, e)
		if !p.keyword("and") {
			return And(es...), nil
		}
	}
}

// primary parses a parenthesized expression or a comparison.
func (p *parser) primary() (Expr, error) {
	if p.i < len(p.s) && p.s[p.i] == '(' {
		if p.depth++; p.depth > maxDepth {
			return Expr{}, p.errorf("parentheses nested deeper than %d", maxDepth)
		}
		p.i++
		p.space()
		e, err := p.or()
		if err != nil {
			return Expr{}, err
		}
		if p.i == len(p.s) || p.s[p.i] != ')' {
			return Expr{}, p.errorf("expected ')'")
		}
		p.i++
		p.space()
		p.depth--
		return e, nil
	}
	at := p.i
	prop := p.word()
	if !ValidProperty(prop) {
		p.i = at
		return Expr{}, p.errorf("expected a property name")
	}
	at = p.i
	op := Op(p.word())
	if !op.valid() {
		p.i = at
		return Expr{}, p.errorf("expected eq, ne, gt, ge, lt or le")
	}
	v, err := p.literal()
	if err != nil {
		return Expr{}, err
	}
	return newCmp(prop, op, v), nil
}

// literal parses a string literal.
func (p *parser) literal() (string, error) {
	if p.i == len(p.s) || p.s[p.i] != '\'' {
		return "", p.errorf("expected a string literal")
	}
	start := p.i
	p.i++
	var b []byte // only when the value holds a quote
	for {
		j := strings.IndexByte(p.s[p.i:], '\'')
		if j < 0 {
			p.i = start
			return "", p.errorf("unterminated string literal")
		}
		seg := p.s[p.i : p.i+j]
		p.i += j + 1
		if p.i < len(p.s) && p.s[p.i] == '\'' { // '' is one quote
			b = append(append(b, seg...), '\'')
			p.i++
			continue
		}
		p.space()
		if b == nil {
			return seg, nil
		}
		return string(append(b, seg...)), nil
	}
}
