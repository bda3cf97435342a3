package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// goFile writes a Go file of header, then n filler lines, then tail, and
// returns its path.
func goFile(t *testing.T, header string, n int, tail string) string {
	t.Helper()
	var b strings.Builder
	b.WriteString(header)
	for i := range n {
		fmt.Fprintf(&b, "// filler %d\n", i)
	}
	b.WriteString(tail)
	path := filepath.Join(t.TempDir(), "x.go")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// body returns a function named name whose body has n statements.
func body(doc, name string, n int) string {
	var b strings.Builder
	b.WriteString(doc)
	fmt.Fprintf(&b, "func %s() {\n\tx := 0\n", name)
	for range n {
		b.WriteString("\tx++\n")
	}
	b.WriteString("\t_ = x\n}\n")
	return b.String()
}

// table returns a function named name that returns a slice literal of n
// elements.
func table(name string, n int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "func %s() []int {\n\treturn []int{\n", name)
	for i := range n {
		fmt.Fprintf(&b, "\t\t%d,\n", i)
	}
	b.WriteString("\t}\n}\n")
	return b.String()
}

func TestCheckFile(t *testing.T) {
	for _, tc := range []struct {
		name  string
		path  func(t *testing.T) string
		wants []string // substrings of the offences, in order
	}{
		{"short file", func(t *testing.T) string { return goFile(t, "package x\n", 10, "") }, nil},
		{"long file", func(t *testing.T) string { return goFile(t, "package x\n", 650, "") },
			[]string{":1: file has 651 lines"}},
		{"long file with a reason", func(t *testing.T) string {
			return goFile(t, "// Size: one generated table.\npackage x\n", 650, "")
		}, nil},
		{"long file with the reason too far down", func(t *testing.T) string {
			return goFile(t, "package x\n"+strings.Repeat("\n", 20)+"// Size: too late.\n", 650, "")
		}, []string{"file has"}},
		{"long function", func(t *testing.T) string { return goFile(t, "package x\n", 0, body("", "long", 120)) },
			[]string{":2: long has 124 lines"}},
		{"long method", func(t *testing.T) string {
			return goFile(t, "package x\n\ntype T struct{}\n", 0, strings.Replace(body("", "long", 120), "func long", "func (T) long", 1))
		}, []string{"(T).long has"}},
		{"long function with a reason", func(t *testing.T) string {
			return goFile(t, "package x\n", 0, body("// long counts.\n//\n// Size: a story that reads best whole.\n", "long", 120))
		}, nil},
		{"short function", func(t *testing.T) string { return goFile(t, "package x\n", 0, body("", "short", 90)) }, nil},
		{"table", func(t *testing.T) string { return goFile(t, "package x\n", 0, table("tbl", 150)) }, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := checkFile(tc.path(t))
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tc.wants) {
				t.Fatalf("offences %q, want %d", got, len(tc.wants))
			}
			for i, want := range tc.wants {
				if !strings.Contains(got[i], want) {
					t.Errorf("offence %q, want it to contain %q", got[i], want)
				}
			}
		})
	}
}

func TestCheckTreeSkipsTestdata(t *testing.T) {
	root := t.TempDir()
	long := "package x\n" + strings.Repeat("// filler\n", 700)
	for _, dir := range []string{"testdata", ".hidden", "bin"} {
		if err := os.MkdirAll(filepath.Join(root, dir), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, dir, "x.go"), []byte(long), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(root, "x_test.go"), []byte(long), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := checkTree(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || !strings.Contains(got[0], "x_test.go:1:") {
		t.Fatalf("offences %q, want just the test file", got)
	}
}

// TestCheckTreePackageFiles: a directory of more than maxPackageFiles
// non-test Go files is an offence, unless its doc.go gives the reason;
// test files do not count.
func TestCheckTreePackageFiles(t *testing.T) {
	write := func(dir, name, text string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	fill := func(dir string, n int) {
		for i := range n {
			write(dir, fmt.Sprintf("f%d.go", i), "package x\n")
			write(dir, fmt.Sprintf("f%d_test.go", i), "package x\n")
		}
	}
	for _, tc := range []struct {
		name  string
		files int
		doc   string
		want  bool
	}{
		{"at the limit", maxPackageFiles, "", false},
		{"over the limit", maxPackageFiles + 1, "", true},
		{"over the limit with a reason", maxPackageFiles, "// Size: one idea, many generated files.\npackage x\n", false},
		{"over the limit, doc.go without a reason", maxPackageFiles, "// Package x is x.\npackage x\n", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			fill(root, tc.files)
			if tc.doc != "" {
				write(root, "doc.go", tc.doc)
			}
			got, err := checkTree(root)
			if err != nil {
				t.Fatal(err)
			}
			if flagged := len(got) == 1 && strings.Contains(got[0], "non-test Go files"); flagged != tc.want || len(got) > 1 {
				t.Fatalf("offences %q, want a package offence: %v", got, tc.want)
			}
		})
	}
}
