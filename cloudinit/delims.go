package cloudinit

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// checkQuotes finds the quoted strings, raw strings and character
// constants inside actions that do not end before the next %>, one error
// per such action, with the position of its opening quote.
//
// text/template ends an action at the first %> that is not inside a quote,
// so an action with a quote left open runs on through the text after it,
// and its errors quote that text as a malformed character constant or an
// unexpected string: a join token in the next line of a cloud-config. Every
// action that passes this check ends at the first %> after its <%, as a
// reader sees it, so text/template's errors quote only the text of actions.
// The cost is that an action cannot hold %> inside a quoted string; outside
// an action %> is plain text and needs no quoting.
//
// The scan follows text/template's lexer: an action starts at <%, a
// comment right after "<%" or "<%- " ends at the first */, and inside an
// action "..." and '...' end at an unescaped quote or a newline, `...` at
// the next backquote. Where text/template would stop with an error of its
// own (an unclosed comment, an unterminated string at a newline or at the
// end), the scan stops: those errors quote nothing.
func checkQuotes(text string) error {
	var errs []error
	i := 0
	for {
		start := strings.Index(text[i:], LeftDelim)
		if start < 0 {
			break
		}
		i += start + len(LeftDelim)
		if strings.HasPrefix(text[i:], "- ") || strings.HasPrefix(text[i:], "-\t") ||
			strings.HasPrefix(text[i:], "-\r") || strings.HasPrefix(text[i:], "-\n") {
			if strings.HasPrefix(text[i+2:], "/*") {
				i += 2
			}
		}
		if strings.HasPrefix(text[i:], "/*") {
			end := strings.Index(text[i+2:], "*/")
			if end < 0 {
				break // unclosed comment
			}
			i += 2 + end + 2
			continue // text/template wants %> next, or reports it
		}
		next, err, stop := scanAction(text, i)
		if err != nil {
			errs = append(errs, err)
		}
		if stop {
			break
		}
		i = next
	}
	return errors.Join(errs...)
}

// scanAction scans the inside of one action from i and returns where the
// text after it starts. stop is true where text/template's lexer stops.
func scanAction(text string, i int) (next int, err error, stop bool) {
	for i < len(text) {
		if strings.HasPrefix(text[i:], RightDelim) {
			return i + len(RightDelim), nil, false
		}
		switch q := text[i]; q {
		case '"', '\'', '`':
			open := i
			i++
			for {
				if i >= len(text) {
					return i, nil, true // unterminated: text/template says so
				}
				c := text[i]
				if strings.HasPrefix(text[i:], RightDelim) || c == '\\' && strings.HasPrefix(text[i+1:], RightDelim) {
					// The action ends here for a reader: go on after
					// it, to report every such action at once.
					line, col := position(text, open)
					return i + strings.Index(text[i:], RightDelim) + len(RightDelim), fmt.Errorf("line %d, column %d: a %s opened in this action runs past its %s; close it before the %s",
						line, col, quoteName(q), RightDelim, RightDelim), false
				}
				if q != '`' && c == '\\' {
					i += 2
					if i-1 < len(text) && text[i-1] == '\n' {
						return i, nil, true
					}
					continue
				}
				if q != '`' && c == '\n' {
					return i, nil, true
				}
				i++
				if c == q {
					break
				}
			}
		default:
			i++
		}
	}
	return i, nil, true // unclosed action
}

func quoteName(q byte) string {
	switch q {
	case '\'':
		return "character constant (')"
	case '`':
		return "raw string (`)"
	}
	return `quoted string (")`
}

// position returns the 1-based line and column (in characters) of byte
// offset off.
func position(text string, off int) (line, col int) {
	before := text[:off]
	line = strings.Count(before, "\n") + 1
	col = utf8.RuneCountInString(before[strings.LastIndexByte(before, '\n')+1:]) + 1
	return line, col
}
