package cloudinit

import (
	"strings"
	"testing"
)

// secret stands for a join token in the text of a template. Its letters
// occur in no message of text/template's or ours.
const secret = "QZXJ.KVWPQZXJKVWP"

// FuzzErrorsQuoteNoText checks that no error of Parse or Render quotes
// text outside the template's actions: a secret placed between a fuzzed
// prefix and suffix never appears in an error, in whole or in part, unless
// the secret's text also occurs inside an action.
func FuzzErrorsQuoteNoText(f *testing.F) {
	for _, s := range [][2]string{
		{`<% if eq .Arch 'arm64 %>arm<% end %> && kubeadm join --token `, `'`},
		{`<% if eq .Arch "arm64 %>arm<% end %> --token `, `" %>`},
		{"<% `x %> ", "` %>"},
		{`<% printf "%s" 'a %> `, `' %>`},
		{"<% .Pool %>\n", "\n<% .Nope %>"},
		{`<% index .Labels "x %>`, `" %>`},
		{"<%/* c %> ", " */%>"},
		{`<% "\%> `, `" %>`},
		{`<% 1`, `'' %>`},
		{`<% .TalosNodeTaints %>`, ""},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, prefix, suffix string) {
		text := prefix + secret + suffix
		var actions strings.Builder // the text of every action, as a reader sees it
		for rest := text; ; {
			_, after, ok := strings.Cut(rest, LeftDelim)
			if !ok {
				break
			}
			inside, after2, _ := strings.Cut(after, RightDelim)
			actions.WriteString(inside + "\x00")
			rest = after2
		}
		var errs []string
		tmpl, err := Parse(text)
		if err != nil {
			errs = append(errs, err.Error())
		} else {
			v := values()
			v.Taints = append(v.Taints, v.Taints[0]) // two taints with one key: TalosNodeTaints fails
			if _, err := tmpl.Render(v); err != nil {
				errs = append(errs, err.Error())
			}
		}
		for _, msg := range errs {
			for n := 4; n <= len(secret); n++ {
				for i := 0; i+n <= len(secret); i++ {
					part := secret[i : i+n]
					if strings.Contains(msg, part) && !strings.Contains(actions.String(), part) {
						t.Fatalf("the error of template %q quotes %q from outside its actions: %s", text, part, msg)
					}
				}
			}
		}
	})
}
