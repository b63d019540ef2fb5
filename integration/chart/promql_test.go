package chart

import (
	"bufio"
	"context"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"github.com/prometheus/prometheus/tsdb/chunks"
	"github.com/prometheus/prometheus/util/annotations"
)

// promParser parses PromQL as a Prometheus without experimental features
// does.
var promParser = parser.NewParser(parser.Options{})

// standardMetrics are the metrics of the Go and process collectors that
// serve registers and the dashboard uses (cmd/hcloudscale's
// TestMonitoringExamples checks that serve exposes them).
var standardMetrics = []string{"process_cpu_seconds_total"}

// documentedMetrics reads the table of docs/deploy.md's "Metrics": every
// metric the code registers (cmd/hcloudscale's TestMetricsTable keeps the
// table so), with _bucket, _sum and _count for a histogram.
func documentedMetrics(t *testing.T) map[string]bool {
	t.Helper()
	doc := string(readFile(t, "../../docs/deploy.md"))
	i := strings.Index(doc, "\n### Metrics\n")
	if i < 0 {
		t.Fatal("docs/deploy.md has no ### Metrics section")
	}
	names := map[string]bool{}
	name := regexp.MustCompile("`([a-z_]+)`")
	sc := bufio.NewScanner(strings.NewReader(doc[i+1:]))
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") && len(names) > 0 {
			break
		}
		cells := strings.Split(line, "|")
		if !strings.HasPrefix(line, "| `") || len(cells) < 4 {
			continue
		}
		for _, m := range name.FindAllStringSubmatch(cells[1], -1) {
			names[m[1]] = true
			if strings.HasPrefix(strings.TrimSpace(cells[3]), "histogram") {
				names[m[1]+"_bucket"], names[m[1]+"_sum"], names[m[1]+"_count"] = true, true, true
			}
		}
	}
	if len(names) < 20 {
		t.Fatalf("docs/deploy.md's metrics table lists %d metrics; the table was not read", len(names))
	}
	for _, n := range standardMetrics {
		names[n] = true
	}
	return names
}

// parseExpr parses a query and fails the test, naming where it is, if it
// is not PromQL.
func parseExpr(t *testing.T, where, query string) parser.Expr {
	t.Helper()
	expr, err := promParser.ParseExpr(query)
	if err != nil {
		t.Fatalf("%s: %q: %v", where, query, err)
	}
	return expr
}

// selectors returns the vector selectors of expr, those inside
// subqueries and range vectors included.
func selectors(expr parser.Expr) []*parser.VectorSelector {
	var out []*parser.VectorSelector
	parser.Inspect(expr, func(n parser.Node, _ []parser.Node) error {
		if vs, ok := n.(*parser.VectorSelector); ok {
			out = append(out, vs)
		}
		return nil
	})
	return out
}

// matcher returns the matcher of label in ms, nil without one.
func matcher(ms []*labels.Matcher, label string) *labels.Matcher {
	i := slices.IndexFunc(ms, func(m *labels.Matcher) bool { return m.Name == label })
	if i < 0 {
		return nil
	}
	return ms[i]
}

// memSeries is an in-memory store for the PromQL engine: series written
// in Prometheus' series notation (`metric{label="v"} 0x10 1x20`), one
// sample per step from time 0.
type memSeries []storage.Series

func loadSeries(t *testing.T, step time.Duration, lines ...string) memSeries {
	t.Helper()
	var out memSeries
	for _, line := range lines {
		lset, values, err := promParser.ParseSeriesDesc(line)
		if err != nil {
			t.Fatalf("series %q: %v", line, err)
		}
		var samples []chunks.Sample
		for i, v := range values {
			if !v.Omitted {
				samples = append(samples, floatSample{t: int64(i) * step.Milliseconds(), f: v.Value})
			}
		}
		out = append(out, storage.NewListSeries(lset, samples))
	}
	return out
}

// Querier answers a Select with the matching series, sorted.
func (s memSeries) Querier(int64, int64) (storage.Querier, error) {
	return &storage.MockQuerier{SelectMockFunction: func(_ bool, _ *storage.SelectHints, ms ...*labels.Matcher) storage.SeriesSet {
		set := &seriesSet{i: -1}
		for _, series := range s {
			if all(ms, series.Labels()) {
				set.series = append(set.series, series)
			}
		}
		slices.SortFunc(set.series, func(a, b storage.Series) int { return labels.Compare(a.Labels(), b.Labels()) })
		return set
	}}, nil
}

// seriesSet iterates over series.
type seriesSet struct {
	series []storage.Series
	i      int
}

func (s *seriesSet) Next() bool                      { s.i++; return s.i < len(s.series) }
func (s *seriesSet) At() storage.Series              { return s.series[s.i] }
func (*seriesSet) Err() error                        { return nil }
func (*seriesSet) Warnings() annotations.Annotations { return nil }

func all(ms []*labels.Matcher, lset labels.Labels) bool {
	for _, m := range ms {
		if !m.Matches(lset.Get(m.Name)) {
			return false
		}
	}
	return true
}

// eval evaluates query over s at instant at, as a rule evaluation does.
func (s memSeries) eval(t *testing.T, query string, at time.Duration) promql.Vector {
	t.Helper()
	engine := promql.NewEngine(promql.EngineOpts{MaxSamples: 1e6, Timeout: time.Minute, LookbackDelta: 5 * time.Minute, Parser: promParser})
	q, err := engine.NewInstantQuery(context.Background(), s, nil, query, time.Unix(0, 0).Add(at))
	if err != nil {
		t.Fatalf("%q: %v", query, err)
	}
	defer q.Close()
	res := q.Exec(context.Background())
	if res.Err != nil {
		t.Fatalf("%q: %v", query, res.Err)
	}
	vec, err := res.Vector()
	if err != nil {
		t.Fatalf("%q: %v", query, err)
	}
	return vec
}

// floatSample is one float sample of a series.
type floatSample struct {
	t int64
	f float64
}

func (s floatSample) T() int64                      { return s.t }
func (s floatSample) ST() int64                     { return 0 }
func (s floatSample) F() float64                    { return s.f }
func (s floatSample) H() *histogram.Histogram       { return nil }
func (s floatSample) FH() *histogram.FloatHistogram { return nil }
func (s floatSample) Type() chunkenc.ValueType      { return chunkenc.ValFloat }
func (s floatSample) Copy() chunks.Sample           { return s }
