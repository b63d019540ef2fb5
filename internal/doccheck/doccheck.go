// Package doccheck checks the repository's Markdown documentation: that
// every relative link, and every #anchor, points at something that exists.
// Its test runs the check over the READMEs and docs/ of the repository, so
// that `go test ./...` fails on a broken link.
package doccheck

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"unicode"
)

// A Link is one link of a Markdown file.
type Link struct {
	File   string // the file it is in, as given to Links
	Line   int    // 1-based
	Target string // as written: path, path#anchor or #anchor
}

var (
	// inlineLink matches [text](target) and [text](target "title"), and
	// the image form; the text may hold one level of brackets.
	inlineLink = regexp.MustCompile(`\]\(\s*<?([^)\s>]*)>?(?:\s+"[^"]*")?\s*\)`)
	// refDef matches a reference definition: [label]: target.
	refDef = regexp.MustCompile(`^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+"[^"]*")?\s*$`)
	// codeSpan matches inline code, whose brackets are not links.
	codeSpan = regexp.MustCompile("`+[^`]*`+")
	// htmlAnchor matches an explicit anchor: <a id="x"> or <a name="x">.
	htmlAnchor = regexp.MustCompile(`<a\s+(?:id|name)="([^"]+)"`)
)

// Links returns the links of the Markdown in data, outside fenced code
// blocks and code spans.
func Links(file string, data []byte) []Link {
	var links []Link
	fence := ""
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if inFence(line, &fence) {
			continue
		}
		if m := refDef.FindStringSubmatch(line); m != nil {
			links = append(links, Link{File: file, Line: n, Target: m[1]})
			continue
		}
		for _, m := range inlineLink.FindAllStringSubmatch(codeSpan.ReplaceAllString(line, ""), -1) {
			links = append(links, Link{File: file, Line: n, Target: m[1]})
		}
	}
	return links
}

// inFence reports whether line belongs to a fenced code block (its fences
// included), given the fence open before it ("" for none), and updates it.
func inFence(line string, fence *string) bool {
	t := strings.TrimLeft(line, " ")
	if len(line)-len(t) > 3 {
		return *fence != ""
	}
	for _, c := range []string{"`", "~"} {
		rest := strings.TrimLeft(t, c)
		n := len(t) - len(rest)
		if n < 3 {
			continue
		}
		switch {
		case *fence == "":
			*fence = strings.Repeat(c, n)
			return true
		case strings.HasPrefix(*fence, c) && n >= len(*fence) && strings.TrimSpace(rest) == "":
			*fence = ""
			return true
		}
	}
	return *fence != ""
}

// Anchors returns the anchors GitHub makes for the Markdown in data: one
// per heading (see Slug; a repeated slug gets -1, -2, ...) and every
// explicit <a id> or <a name>.
func Anchors(data []byte) map[string]bool {
	anchors := map[string]bool{}
	seen := map[string]int{}
	fence := ""
	for _, line := range strings.Split(string(data), "\n") {
		if inFence(line, &fence) {
			continue
		}
		for _, m := range htmlAnchor.FindAllStringSubmatch(line, -1) {
			anchors[m[1]] = true
		}
		t := strings.TrimLeft(line, " ")
		if len(line)-len(t) > 3 || !strings.HasPrefix(t, "#") {
			continue
		}
		level := len(t) - len(strings.TrimLeft(t, "#"))
		if level > 6 || (len(t) > level && t[level] != ' ') {
			continue
		}
		slug := Slug(strings.TrimRight(strings.TrimSpace(t[level:]), "#"))
		if n := seen[slug]; n > 0 {
			anchors[fmt.Sprintf("%s-%d", slug, n)] = true
		} else {
			anchors[slug] = true
		}
		seen[slug]++
	}
	return anchors
}

// mdLink matches a link inside a heading, whose text alone makes the slug.
var mdLink = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)

// Slug is the anchor GitHub gives a heading: its text without link
// targets and markup, lower-cased, without punctuation but '-' and '_',
// with each space a '-'.
func Slug(heading string) string {
	heading = mdLink.ReplaceAllString(heading, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// Check reads each Markdown file (paths relative to root) and returns one
// error per relative link whose file or directory does not exist, and per
// #anchor that the Markdown file it points into does not define. A link
// to a directory with an anchor points into its README.md. Links with a
// scheme (https:, mailto:) are not checked.
func Check(root string, files []string) []error {
	var errs []error
	anchors := map[string]map[string]bool{} // file -> its anchors
	anchorsOf := func(path string) (map[string]bool, error) {
		if a, ok := anchors[path]; ok {
			return a, nil
		}
		data, err := os.ReadFile(filepath.Join(root, path))
		if err != nil {
			return nil, err
		}
		anchors[path] = Anchors(data)
		return anchors[path], nil
	}
	for _, file := range files {
		data, err := os.ReadFile(filepath.Join(root, file))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, l := range Links(file, data) {
			if err := checkLink(root, l, anchorsOf); err != nil {
				errs = append(errs, fmt.Errorf("%s:%d: %s: %w", l.File, l.Line, l.Target, err))
			}
		}
	}
	return errs
}

// scheme matches a URL scheme such as https: or mailto:.
var scheme = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*:`)

func checkLink(root string, l Link, anchorsOf func(string) (map[string]bool, error)) error {
	if l.Target == "" {
		return fmt.Errorf("empty link")
	}
	if scheme.MatchString(l.Target) {
		return nil
	}
	path, anchor, _ := strings.Cut(l.Target, "#")
	target := filepath.ToSlash(l.File)
	if path != "" {
		if strings.HasPrefix(path, "/") {
			return fmt.Errorf("absolute path: write it relative to %s", l.File)
		}
		target = filepath.ToSlash(filepath.Join(filepath.Dir(l.File), path))
		if target == ".." || strings.HasPrefix(target, "../") {
			return fmt.Errorf("points outside the repository")
		}
		fi, err := os.Stat(filepath.Join(root, target))
		if err != nil {
			return fmt.Errorf("no such file or directory")
		}
		if fi.IsDir() {
			if anchor == "" {
				return nil
			}
			target = filepath.ToSlash(filepath.Join(target, "README.md"))
		}
	}
	if anchor == "" {
		return nil
	}
	if !strings.HasSuffix(target, ".md") {
		return nil // line anchors of source files are GitHub's
	}
	a, err := anchorsOf(target)
	if err != nil {
		return fmt.Errorf("anchor #%s: %w", anchor, err)
	}
	if !a[anchor] {
		return fmt.Errorf("no heading or anchor #%s in %s", anchor, target)
	}
	return nil
}
