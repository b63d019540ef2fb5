package doccheck

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// root is the repository, seen from this package's directory.
const root = "../.."

// documents returns the Markdown files whose links are checked: the
// READMEs, docs/ and BENCHMARKS.md, paths relative to root.
func documents(t *testing.T) []string {
	t.Helper()
	files := []string{
		"README.md",
		"BENCHMARKS.md",
		"charts/hcloudscale/README.md",
		"adapter/README.md",
		"e2e/README.md",
		"integration/README.md",
	}
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) == 0 {
		t.Fatal("docs/ has no Markdown files")
	}
	for _, d := range docs {
		files = append(files, "docs/"+filepath.Base(d))
	}
	err = filepath.WalkDir(filepath.Join(root, "examples"), func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && d.Name() == "README.md" {
			rel, err := filepath.Rel(root, path)
			if err != nil {
				return err
			}
			files = append(files, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// TestRepositoryLinks fails on a relative link or #anchor of the
// documentation that does not resolve.
func TestRepositoryLinks(t *testing.T) {
	files := documents(t)
	for _, err := range Check(root, files) {
		t.Error(err)
	}
	var n int
	for _, f := range files {
		data, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		n += len(Links(f, data))
	}
	if n < 100 {
		t.Errorf("found %d links in %d files; the parser misses links", n, len(files))
	}
}

// TestReadmeCommands keeps the two commands at the top of README.md the
// ones the project uses: the demo command of cmd/hcloudscale, with its own
// summary as the comment, and the test command of .ci/run.
func TestReadmeCommands(t *testing.T) {
	readme := read(t, "README.md")
	block := regexp.MustCompile("(?s)^# [^\n]+\n+```sh\n(.*?)\n```").FindStringSubmatch(readme)
	if block == nil {
		t.Fatal("README.md does not start with its title and a ```sh block")
	}
	lines := strings.Split(block[1], "\n")
	if len(lines) != 2 {
		t.Fatalf("README.md's first block has %d lines, want 2 (the demo and the tests):\n%s", len(lines), block[1])
	}
	demo, demoComment, _ := strings.Cut(lines[0], "#")
	tests, _, _ := strings.Cut(lines[1], "#")

	// The demo: a subcommand that cmd/hcloudscale registers, with the
	// summary its help prints.
	if got, want := strings.Fields(demo), []string{"go", "run", "./cmd/hcloudscale", "demo"}; !slices.Equal(got, want) {
		t.Errorf("README's first command is %q, want %q", strings.Join(got, " "), strings.Join(want, " "))
	}
	summary := regexp.MustCompile(`\{name: "demo", summary: "([^"]+)"`).FindStringSubmatch(read(t, "cmd/hcloudscale/main.go"))
	if summary == nil {
		t.Fatal(`cmd/hcloudscale/main.go registers no command {name: "demo", summary: ...}`)
	}
	if got := strings.TrimSpace(demoComment); got != summary[1] {
		t.Errorf("README's comment on the demo is %q, want the command's summary %q", got, summary[1])
	}

	// The tests: the go test -race command of .ci/run, less -count=1.
	var ci []string
	for _, line := range strings.Split(read(t, ".ci/run"), "\n") {
		if f := strings.Fields(line); len(f) > 2 && f[0] == "go" && f[1] == "test" && slices.Contains(f, "-race") {
			ci = slices.DeleteFunc(f, func(s string) bool { return s == "-count=1" })
			break
		}
	}
	if ci == nil {
		t.Fatal(".ci/run has no go test -race command")
	}
	if got := strings.Fields(tests); !slices.Equal(got, ci) {
		t.Errorf("README's second command is %q, want .ci/run's %q (without -count=1)", strings.Join(got, " "), strings.Join(ci, " "))
	}
}

func read(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, path))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// TestCheckReportsBrokenLinks runs the checker on a small tree with good
// and broken links, so that a checker that finds nothing fails too.
// TestDocumentLengths keeps the two front documents short: README.md
// for a user deciding and starting, BENCHMARKS.md with each scenario once
// (the history is in git).
func TestDocumentLengths(t *testing.T) {
	for file, limit := range map[string]int{"README.md": 250, "BENCHMARKS.md": 300} {
		if n := strings.Count(read(t, file), "\n"); n > limit {
			t.Errorf("%s has %d lines; keep it at most %d (details go to docs/)", file, n, limit)
		}
	}
}

func TestCheckReportsBrokenLinks(t *testing.T) {
	dir := t.TempDir()
	write := func(path, content string) {
		t.Helper()
		p := filepath.Join(dir, path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("docs/guide.md", "# Guide\n\n## Deploying `serve`\n\n## Steps, in order\n\n## Steps, in order\n\n<a id=\"custom\"></a>\n")
	write("sub/README.md", "# Sub\n\n## Install\n")
	write("sub/file.go", "package sub\n")
	write("README.md", strings.Join([]string{
		"# Top",
		"",
		"[ok file](docs/guide.md) [ok anchor](docs/guide.md#deploying-serve)",
		"[ok repeated](docs/guide.md#steps-in-order-1) [ok html](docs/guide.md#custom)",
		"[ok dir](sub) [ok dir anchor](sub#install) [ok self](#top) [ok go](sub/file.go#L1)",
		"[ok url](https://example.com/missing) ![ok image](sub/file.go \"title\")",
		"`[in code](missing.md)`",
		"```md",
		"[in a fence](missing.md)",
		"```",
		"[missing file](docs/missing.md)",
		"[missing anchor](docs/guide.md#deploying)",
		"[missing repeat](docs/guide.md#steps-in-order-2)",
		"[missing self](#nowhere) [missing dir anchor](sub#usage)",
		"[outside](../elsewhere.md)",
		"",
		"[ref]: docs/nothing.md",
	}, "\n"))
	write("docs/other.md", "# Other\n\n[back](../README.md#top) [broken back](../README.md#bottom)\n")

	var got []string
	for _, err := range Check(dir, []string{"README.md", "docs/other.md"}) {
		got = append(got, err.Error())
	}
	want := []string{
		"README.md:11: docs/missing.md: no such file or directory",
		"README.md:12: docs/guide.md#deploying: no heading or anchor #deploying in docs/guide.md",
		"README.md:13: docs/guide.md#steps-in-order-2: no heading or anchor #steps-in-order-2 in docs/guide.md",
		"README.md:14: #nowhere: no heading or anchor #nowhere in README.md",
		"README.md:14: sub#usage: no heading or anchor #usage in sub/README.md",
		"README.md:15: ../elsewhere.md: points outside the repository",
		"README.md:17: docs/nothing.md: no such file or directory",
		"docs/other.md:3: ../README.md#bottom: no heading or anchor #bottom in README.md",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Check (-want +got):\n%s", diff)
	}
}

func TestCheckReportsUnreadableFile(t *testing.T) {
	errs := Check(t.TempDir(), []string{"absent.md"})
	if len(errs) != 1 || !errors.Is(errs[0], fs.ErrNotExist) {
		t.Errorf("Check of a missing file = %v, want one fs.ErrNotExist", errs)
	}
}

func TestSlug(t *testing.T) {
	for _, c := range []struct{ heading, want string }{
		{"Deploying `hcloudscale serve`", "deploying-hcloudscale-serve"},
		{"The loop at 1,000 and 5,000 nodes", "the-loop-at-1000-and-5000-nodes"},
		{"The autoscaler's own loop", "the-autoscalers-own-loop"},
		{"The --nodes flag", "the---nodes-flag"},
		{"externalgrpc: server cost of the autoscaler's hot calls", "externalgrpc-server-cost-of-the-autoscalers-hot-calls"},
		{"See [the chart](charts/hcloudscale) now", "see-the-chart-now"},
		{"snake_case stays", "snake_case-stays"},
	} {
		if got := Slug(c.heading); got != c.want {
			t.Errorf("Slug(%q) = %q; want %q", c.heading, got, c.want)
		}
	}
}
