package cloudinit

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"text/template"
	"text/template/parse"

	corev1 "k8s.io/api/core/v1"
)

// The delimiters of a template's actions. Neither occurs in cloud-init's
// own Jinja templates ({{ }}, {% %}, {# #}), in shell (${...}, $(...)) or
// in YAML, so a template can use all three as plain text.
const (
	LeftDelim  = "<%"
	RightDelim = "%>"
)

// Values are what one rendering knows of the server it is for.
type Values struct {
	Pool       string
	Server     string // the server name, which is also the node name
	Cluster    string // empty without a cluster name
	Location   string
	ServerType string
	Arch       string // amd64 or arm64
	Labels     map[string]string
	Taints     []corev1.Taint
}

// Template is a parsed cloud-init template. It is safe for concurrent use.
type Template struct {
	tmpl *template.Template
	refs map[string]bool // the fields of the top-level data that the template names
	// whole are the fields the template uses whole: printed or ranged
	// over, not only one entry (.Labels.x, index .Labels "x") or their
	// length.
	whole map[string]bool
}

// name is the template's name in text/template's messages, which Parse and
// Render replace with line numbers.
const name = "cloudInit"

// Parse parses a cloud-init template. An action that does not parse, a
// function that does not exist or a field that the template data does not
// have is an error with its line number. Errors quote template actions,
// never the text around them, which may hold join tokens: a quote left
// open inside an action, which text/template would let run on into the
// text after the action, is an error of its own with the quote's line and
// column.
func Parse(text string) (*Template, error) {
	if err := checkQuotes(text); err != nil {
		return nil, err
	}
	t, err := template.New(name).Delims(LeftDelim, RightDelim).Option("missingkey=error").Parse(text)
	if err != nil {
		return nil, cleanError(err)
	}
	refs, whole := map[string]bool{}, map[string]bool{}
	var errs []error
	if t.Tree != nil {
		walk(t.Tree.Root, true, func(n parse.Node, field string, all bool) {
			refs[field] = true
			whole[field] = whole[field] || all
			if !knownFields[field] {
				errs = append(errs, fmt.Errorf("line %d: unknown field .%s; the fields are %s",
					lineOf(t.Tree, n), field, strings.Join(Fields(), ", ")))
			}
		})
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return &Template{tmpl: t, refs: refs, whole: whole}, nil
}

// Render renders the template for one server.
func (t *Template) Render(v Values) (string, error) {
	var b strings.Builder
	if err := t.tmpl.Execute(&b, &data{v: v}); err != nil {
		return "", cleanError(err)
	}
	return b.String(), nil
}

// PrintsLabels reports whether the template uses all the labels of the
// pool, itself (.Labels printed or ranged over; one entry such as
// .Labels.x is not all of them) or through a helper that prints them.
func (t *Template) PrintsLabels() bool {
	return t.whole["Labels"] || t.refsAny("NodeLabels", "KubeletFlags", "K3sFlags", "KubeadmKubeletExtraArgs", "TalosNodeLabels")
}

// PrintsTaints reports whether the template uses all the taints of the
// pool, itself or through a helper that prints them.
func (t *Template) PrintsTaints() bool {
	return t.whole["Taints"] || t.refsAny("NodeTaints", "KubeletFlags", "K3sFlags", "KubeadmTaints", "TalosNodeTaints")
}

func (t *Template) refsAny(fields ...string) bool {
	return slices.ContainsFunc(fields, func(f string) bool { return t.refs[f] })
}

// Fields returns the names of the fields and helpers a template can use,
// sorted.
func Fields() []string {
	out := make([]string, 0, len(knownFields))
	for f := range knownFields {
		out = append(out, f)
	}
	slices.Sort(out)
	return out
}

// knownFields are the methods of *data, which are the template's fields.
var knownFields = func() map[string]bool {
	m := map[string]bool{}
	typ := reflect.TypeFor[*data]()
	for i := range typ.NumMethod() {
		m[typ.Method(i).Name] = true
	}
	return m
}()

// walk calls found for every field of the top-level data that the parse
// tree names: fields of dot where dot is the data (outside range and with)
// and fields of $ anywhere.
func walk(n parse.Node, dotIsData bool, found func(n parse.Node, field string, whole bool)) {
	switch n := n.(type) {
	case *parse.ListNode:
		if n == nil {
			return
		}
		for _, c := range n.Nodes {
			walk(c, dotIsData, found)
		}
	case *parse.ActionNode:
		walkPipe(n.Pipe, dotIsData, found)
	case *parse.IfNode:
		walkPipe(n.Pipe, dotIsData, found)
		walk(n.List, dotIsData, found)
		walk(n.ElseList, dotIsData, found)
	case *parse.RangeNode:
		walkPipe(n.Pipe, dotIsData, found)
		walk(n.List, false, found)
		walk(n.ElseList, dotIsData, found)
	case *parse.WithNode:
		walkPipe(n.Pipe, dotIsData, found)
		walk(n.List, false, found)
		walk(n.ElseList, dotIsData, found)
	case *parse.TemplateNode:
		walkPipe(n.Pipe, dotIsData, found)
	}
}

func walkPipe(p *parse.PipeNode, dotIsData bool, found func(n parse.Node, field string, whole bool)) {
	if p == nil {
		return
	}
	for _, cmd := range p.Cmds {
		// A field given to one of these is not printed whole.
		partial := false
		if id, ok := cmd.Args[0].(*parse.IdentifierNode); ok && partialFuncs[id.Ident] {
			partial = true
		}
		for _, arg := range cmd.Args {
			switch a := arg.(type) {
			case *parse.FieldNode:
				if dotIsData {
					found(a, a.Ident[0], !partial && len(a.Ident) == 1)
				}
			case *parse.VariableNode:
				if a.Ident[0] == "$" && len(a.Ident) > 1 {
					found(a, a.Ident[1], !partial && len(a.Ident) == 2)
				}
			case *parse.ChainNode:
				if pn, ok := a.Node.(*parse.PipeNode); ok {
					walkPipe(pn, dotIsData, found)
				}
			case *parse.PipeNode:
				walkPipe(a, dotIsData, found)
			}
		}
	}
}

// partialFuncs are the functions that use part of a map or list, or
// compare it, instead of printing it.
var partialFuncs = map[string]bool{
	"index": true, "len": true, "slice": true, "eq": true, "ne": true, "lt": true, "le": true,
	"gt": true, "ge": true, "and": true, "or": true, "not": true,
}

func lineOf(tree *parse.Tree, n parse.Node) int {
	loc, _ := tree.ErrorContext(n)
	// loc is "name:line:col".
	parts := strings.Split(loc, ":")
	if len(parts) >= 2 {
		var line int
		if _, err := fmt.Sscan(parts[len(parts)-2], &line); err == nil {
			return line
		}
	}
	return 0
}

// cleanError turns text/template's "template: cloudInit:3: ..." and
// "template: cloudInit:3:7: executing \"cloudInit\" at <...>: ..." into
// "line 3: ...".
func cleanError(err error) error {
	msg := err.Error()
	msg = strings.TrimPrefix(msg, "template: ")
	if rest, ok := strings.CutPrefix(msg, name+":"); ok {
		line, after, _ := strings.Cut(rest, ":")
		// Skip a column number.
		if col, after2, ok := strings.Cut(after, ":"); ok && isDigits(col) {
			after = after2
		}
		after = strings.TrimPrefix(after, " ")
		after = strings.TrimPrefix(after, fmt.Sprintf("executing %q at ", name))
		msg = "line " + line + ": " + after
	}
	return errors.New(msg)
}

func isDigits(s string) bool {
	return s != "" && strings.Trim(s, "0123456789") == ""
}
