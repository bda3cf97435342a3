package deploy

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// The module does not depend on Prometheus's own PromQL parser, and this
// check does not need one: it only needs the metric names an expression
// selects. metricNames finds them with a small scanner that skips what
// cannot be a metric name: strings, label matchers {...}, ranges and
// subqueries [...], numbers and durations, Grafana variables, function and
// aggregation names (an identifier before "("), the label lists of
// by/without/on/ignoring/group_left/group_right, and keywords.
// promtool check rules (the Debian package prometheus) parses the rules
// fully where it is installed.

// promKeywords are identifiers that are never metric names when they do
// not stand before "(".
var promKeywords = map[string]bool{
	"and": true, "or": true, "unless": true, "bool": true, "offset": true, "atan2": true,
	"inf": true, "nan": true,
	// Aggregations written "sum by (x) (...)" put their grouping first.
	"sum": true, "min": true, "max": true, "avg": true, "group": true, "stddev": true, "stdvar": true,
	"count": true, "count_values": true, "bottomk": true, "topk": true, "quantile": true,
	"limitk": true, "limit_ratio": true,
}

// groupingKeywords are followed by a parenthesised list of label names.
var groupingKeywords = map[string]bool{
	"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true,
}

func isIdentStart(c byte) bool {
	return c == '_' || c == ':' || ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z')
}

func isIdentChar(c byte) bool { return isIdentStart(c) || ('0' <= c && c <= '9') }

// metricNames returns the metric names expr selects, in order of first
// appearance.
func metricNames(expr string) ([]string, error) {
	var names []string
	s := expr
	i := 0
	for i < len(s) {
		c := s[i]
		switch {
		case c == '#': // a comment, to the end of the line
			for i < len(s) && s[i] != '\n' {
				i++
			}
		case c == '"' || c == '\'' || c == '`':
			end, err := stringEnd(s, i)
			if err != nil {
				return nil, err
			}
			i = end
		case c == '{':
			end, err := closingBracket(s, i)
			if err != nil {
				return nil, err
			}
			if strings.Contains(s[i:end], "__name__") {
				return nil, fmt.Errorf("a selector by __name__ (%s): name the metric directly so it can be checked", s[i:end])
			}
			i = end
		case c == '[':
			end, err := closingBracket(s, i)
			if err != nil {
				return nil, err
			}
			i = end
		case c == '$': // a Grafana variable: $name, ${name}, ${name:format}
			i++
			if i < len(s) && s[i] == '{' {
				end, err := closingBracket(s, i)
				if err != nil {
					return nil, err
				}
				i = end
			} else {
				for i < len(s) && isIdentChar(s[i]) {
					i++
				}
			}
		case '0' <= c && c <= '9' || c == '.' && i+1 < len(s) && '0' <= s[i+1] && s[i+1] <= '9':
			// A number (1, 0.99, 1e3, 0x1f) or a duration (5m, 1h30m).
			for i < len(s) && (isIdentChar(s[i]) || s[i] == '.') {
				i++
			}
		case isIdentStart(c):
			start := i
			for i < len(s) && isIdentChar(s[i]) {
				i++
			}
			word := s[start:i]
			next := skipSpace(s, i)
			lower := strings.ToLower(word)
			switch {
			case groupingKeywords[lower]:
				if next < len(s) && s[next] == '(' {
					end, err := closingBracket(s, next)
					if err != nil {
						return nil, err
					}
					i = end
				}
			case next < len(s) && s[next] == '(':
				// A function or an aggregation: its arguments are scanned on.
			case promKeywords[lower]:
			default:
				if !slices.Contains(names, word) {
					names = append(names, word)
				}
			}
		default:
			i++
		}
	}
	return names, nil
}

// skipSpace returns the index of the next non-space byte of s from j.
func skipSpace(s string, j int) int {
	for j < len(s) && strings.ContainsRune(" \t\r\n", rune(s[j])) {
		j++
	}
	return j
}

// closingBracket returns the index just past the bracket that closes the
// one at s[j], skipping quoted strings inside.
func closingBracket(s string, j int) (int, error) {
	open := s[j]
	close := map[byte]byte{'{': '}', '[': ']', '(': ')'}[open]
	depth := 0
	for k := j; k < len(s); k++ {
		switch c := s[k]; {
		case c == '"' || c == '\'' || c == '`':
			end, err := stringEnd(s, k)
			if err != nil {
				return 0, err
			}
			k = end - 1
		case c == open:
			depth++
		case c == close:
			depth--
			if depth == 0 {
				return k + 1, nil
			}
		}
	}
	return 0, fmt.Errorf("unclosed %q at offset %d", open, j)
}

// stringEnd returns the index just past the string literal that starts at
// i: "..." and '...' with backslash escapes, `...` raw.
func stringEnd(s string, i int) (int, error) {
	quote := s[i]
	for k := i + 1; k < len(s); k++ {
		switch s[k] {
		case '\\':
			if quote != '`' {
				k++
			}
		case quote:
			return k + 1, nil
		}
	}
	return 0, fmt.Errorf("unterminated string at offset %d", i)
}

func TestMetricNames(t *testing.T) {
	for _, tc := range []struct {
		expr string
		want []string
	}{
		{`up`, []string{"up"}},
		{`sweepgate_sessions{state="active"}`, []string{"sweepgate_sessions"}},
		{`rate(a_total{job=~"$job",op!="b_total"}[5m])`, []string{"a_total"}},
		{`sum by (operation, le) (rate(x_bucket[$__rate_interval]))`, []string{"x_bucket"}},
		{`sum(rate(x_total[5m])) by (job) / on (job) group_left (instance) y`, []string{"x_total", "y"}},
		{`histogram_quantile(0.99, sum without (instance) (rate(h_bucket{a="}"}[1h:5m])))`, []string{"h_bucket"}},
		{`(sum(lead) or vector(0)) < 1`, []string{"lead"}},
		{`a > 0 unless b offset 1h > bool 2e3`, []string{"a", "b"}},
		{`max(g and on (job, instance) (l == 1)) > 86400`, []string{"g", "l"}},
		{`time() - max(ts > 0) > 3 * 3600 and max(ts) > 0`, []string{"ts"}},
		{`label_replace(m, "dst", "$1", "src", "(.*)") # a comment naming c_total`, []string{"m"}},
		{"count_values(\"v\", `raw {`) + ns:rule:rate5m", []string{"ns:rule:rate5m"}},
		{`sum by (x) (m1) + Inf - NaN`, []string{"m1"}},
		{`${datasource} + m2{l=~"${job:regex}"}`, []string{"m2"}},
	} {
		got, err := metricNames(tc.expr)
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("metricNames(%s) = %q, %v; want %q", tc.expr, got, err, tc.want)
		}
	}
	for _, bad := range []string{`{__name__="x"}`, `rate(x[5m)`, `x{a="b}`} {
		if got, err := metricNames(bad); err == nil {
			t.Errorf("metricNames(%s) = %q and no error", bad, got)
		}
	}
}
