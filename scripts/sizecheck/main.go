// Command sizecheck keeps the module's Go files readable at a glance: it
// fails when a file (test files included, testdata excluded) is over 600
// lines without a reason, when a function or method is over 100 lines
// without one and its body is not mostly a composite literal (a table), or
// when a directory holds more than 25 non-test Go files (one package that
// has grown several ideas) without one.
//
// A reason is a comment line starting with "// Size:": for a file, within
// its first 15 lines; for a function, in its doc comment; for a package,
// within the first 15 lines of its doc.go.
//
//	go run ./scripts/sizecheck          check the module from the working directory
//	go run ./scripts/sizecheck DIR...   check these directories
//
// Each offender is printed as path:line: message; the exit status is 1 if
// there is any, 2 if a file cannot be read or parsed.
package main

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

const (
	maxFileLines = 600
	maxFuncLines = 100
	// maxPackageFiles is the most non-test Go files one directory holds.
	maxPackageFiles = 25
	// reasonWithin is how many lines at the top of a file may hold its
	// reason.
	reasonWithin = 15
	reasonPrefix = "// Size:"
)

func main() {
	roots := os.Args[1:]
	if len(roots) == 0 {
		roots = []string{"."}
	}
	var offenders []string
	for _, root := range roots {
		found, err := checkTree(root)
		if err != nil {
			fmt.Fprintln(os.Stderr, "sizecheck:", err)
			os.Exit(2)
		}
		offenders = append(offenders, found...)
	}
	for _, o := range offenders {
		fmt.Println(o)
	}
	if len(offenders) > 0 {
		fmt.Fprintf(os.Stderr, "sizecheck: %d offender(s); split them, or write the reason on a %q line\n", len(offenders), reasonPrefix)
		os.Exit(1)
	}
}

// checkTree checks every .go file under root, skipping testdata and hidden
// directories and bin.
func checkTree(root string) ([]string, error) {
	var offenders []string
	// files counts the non-test Go files of each directory.
	files := map[string]int{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if path != root && (name == "testdata" || name == "bin" || strings.HasPrefix(name, ".")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		if !strings.HasSuffix(path, "_test.go") {
			files[filepath.Dir(path)]++
		}
		found, err := checkFile(path)
		offenders = append(offenders, found...)
		return err
	})
	if err != nil {
		return offenders, err
	}
	for _, dir := range slices.Sorted(maps.Keys(files)) {
		if n := files[dir]; n > maxPackageFiles && !packageHasReason(dir) {
			offenders = append(offenders, fmt.Sprintf("%s: package has %d non-test Go files (over %d) and no %q line in its doc.go giving the reason",
				dir, n, maxPackageFiles, reasonPrefix))
		}
	}
	return offenders, nil
}

// packageHasReason reports whether dir's doc.go has a reason line within
// its first reasonWithin lines.
func packageHasReason(dir string) bool {
	path := filepath.Join(dir, "doc.go")
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, parser.ParseComments|parser.PackageClauseOnly)
	return err == nil && fileHasReason(fset, f)
}

// checkFile returns the offences of one file, in line order.
func checkFile(path string) ([]string, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, parser.ParseComments|parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	var offenders []string
	if lines := fset.File(f.Pos()).LineCount(); lines > maxFileLines && !fileHasReason(fset, f) {
		offenders = append(offenders, fmt.Sprintf("%s:1: file has %d lines (over %d) and no %q line in its first %d giving the reason",
			path, lines, maxFileLines, reasonPrefix, reasonWithin))
	}
	for _, decl := range f.Decls {
		fn, ok := decl.(*ast.FuncDecl)
		if !ok || fn.Body == nil {
			continue
		}
		start, end := fset.Position(fn.Pos()).Line, fset.Position(fn.End()).Line
		lines := end - start + 1
		if lines <= maxFuncLines || docHasReason(fn.Doc) || isTable(fset, fn.Body) {
			continue
		}
		offenders = append(offenders, fmt.Sprintf("%s:%d: %s has %d lines (over %d), is not mostly a table and its doc comment has no %q line",
			path, start, funcName(fn), lines, maxFuncLines, reasonPrefix))
	}
	return offenders, nil
}

// fileHasReason reports whether a comment line in the file's first
// reasonWithin lines starts with reasonPrefix.
func fileHasReason(fset *token.FileSet, f *ast.File) bool {
	for _, g := range f.Comments {
		for _, c := range g.List {
			if fset.Position(c.Pos()).Line > reasonWithin {
				return false
			}
			if strings.HasPrefix(c.Text, reasonPrefix) {
				return true
			}
		}
	}
	return false
}

func docHasReason(doc *ast.CommentGroup) bool {
	if doc == nil {
		return false
	}
	for _, c := range doc.List {
		if strings.HasPrefix(c.Text, reasonPrefix) {
			return true
		}
	}
	return false
}

// isTable reports whether composite literals cover at least half of the
// lines of body: the function is a table with a little code around it.
func isTable(fset *token.FileSet, body *ast.BlockStmt) bool {
	first, last := fset.Position(body.Lbrace).Line, fset.Position(body.Rbrace).Line
	covered := make(map[int]bool)
	ast.Inspect(body, func(n ast.Node) bool {
		lit, ok := n.(*ast.CompositeLit)
		if !ok {
			return true
		}
		for l := fset.Position(lit.Lbrace).Line; l <= fset.Position(lit.Rbrace).Line; l++ {
			covered[l] = true
		}
		return false // the outermost literal covers its elements
	})
	return 2*len(covered) >= last-first+1
}

// funcName is fn's name as a reader looks for it: Name, or (Type).Name for
// a method.
func funcName(fn *ast.FuncDecl) string {
	if fn.Recv == nil || len(fn.Recv.List) == 0 {
		return fn.Name.Name
	}
	t := fn.Recv.List[0].Type
	if s, ok := t.(*ast.StarExpr); ok {
		t = s.X
	}
	switch r := t.(type) {
	case *ast.IndexExpr:
		t = r.X
	case *ast.IndexListExpr:
		t = r.X
	}
	if id, ok := t.(*ast.Ident); ok {
		return "(" + id.Name + ")." + fn.Name.Name
	}
	return fn.Name.Name
}
