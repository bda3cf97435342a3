package gateway

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// supportedOperationsDoc is the document that lists operationRules for
// people; TestSupportedOperationsDoc keeps it equal to the table.
const supportedOperationsDoc = "../docs/supported-operations.md"

const (
	tableBegin = "<!-- operations table: generated from gateway/operation.go; SWEEPGATE_UPDATE_DOCS=1 go test ./gateway -run TestSupportedOperationsDoc rewrites it -->"
	tableEnd   = "<!-- end of operations table -->"
)

// renderOperations writes operationRules as a Markdown table, in the
// table's own order.
func renderOperations() string {
	var b strings.Builder
	b.WriteString("| # | operation | method | target | selected by | also accepts |\n|---|---|---|---|---|---|\n")
	targets := map[target]string{targetService: "service (`/`)", targetBucket: "bucket", targetObject: "object"}
	for i, r := range operationRules {
		var sel []string
		for _, s := range r.selectors {
			if s.value != "" {
				sel = append(sel, fmt.Sprintf("`%s=%s`", s.name, s.value))
			} else {
				sel = append(sel, "`"+s.name+"`")
			}
		}
		if r.copy {
			sel = append(sel, "header `x-amz-copy-source`")
		}
		params := make([]string, len(r.params))
		for j, p := range r.params {
			params[j] = "`" + p + "`"
		}
		fmt.Fprintf(&b, "| %d | %s | %s | %s | %s | %s |\n", i+1, r.op, r.method, targets[r.target],
			orDash(strings.Join(sel, ", ")), orDash(strings.Join(params, ", ")))
	}
	return b.String()
}

func orDash(s string) string {
	if s == "" {
		return "–"
	}
	return s
}

func TestSupportedOperationsDoc(t *testing.T) {
	doc, err := os.ReadFile(supportedOperationsDoc)
	if err != nil {
		t.Fatal(err)
	}
	text := string(doc)
	begin, end := strings.Index(text, tableBegin), strings.Index(text, tableEnd)
	if begin < 0 || end < begin {
		t.Fatalf("%s: the markers of the operations table are missing", supportedOperationsDoc)
	}
	want := text[:begin+len(tableBegin)] + "\n" + renderOperations() + text[end:]
	if want == text {
		return
	}
	if os.Getenv("SWEEPGATE_UPDATE_DOCS") == "1" {
		if err := os.WriteFile(supportedOperationsDoc, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Fatalf("%s does not list the operations of gateway/operation.go; run SWEEPGATE_UPDATE_DOCS=1 go test ./gateway -run TestSupportedOperationsDoc", supportedOperationsDoc)
}
