package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// Output formats of --output.
const (
	outputTable = "table"
	outputJSON  = "json"
)

// outputFlag registers --output (and its short form -o).
func outputFlag(fs *flag.FlagSet) *string {
	o := new(string)
	*o = outputTable
	usage := "output format: table (for people) or json (for scripts)"
	fs.StringVar(o, "output", outputTable, usage)
	fs.StringVar(o, "o", outputTable, "short for --output")
	return o
}

// checkOutput validates the value of --output.
func checkOutput(o string) error {
	if o != outputTable && o != outputJSON {
		return fmt.Errorf("--output %q: want table or json", o)
	}
	return nil
}

// table writes aligned columns. Rows are tab-separated cells; the writer
// pads them when flushed.
type table struct {
	tw *tabwriter.Writer
}

func newTable(w io.Writer, header ...string) *table {
	t := &table{tw: tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)}
	if len(header) > 0 {
		t.row(toAny(header)...)
	}
	return t
}

func toAny(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}

// row adds one row; each cell is formatted with %v.
func (t *table) row(cells ...any) {
	parts := make([]string, len(cells))
	for i, c := range cells {
		parts[i] = fmt.Sprint(c)
	}
	fmt.Fprintln(t.tw, strings.Join(parts, "\t"))
}

func (t *table) flush() { _ = t.tw.Flush() }

// writeJSON writes v as indented JSON followed by a newline.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// orDash shows an empty value as "-" in a table.
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// plural returns "1 server" or "3 servers".
func plural(n int, word string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, word)
	}
	return fmt.Sprintf("%d %ss", n, word)
}
