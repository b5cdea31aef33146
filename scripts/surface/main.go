// Command surface prints the number of exported top-level names (functions,
// types, variables and constants; not methods or fields) of each library
// package of the repository, with the target where one is set:
//
//	go run ./scripts/surface          # every package under the current directory
//	go run ./scripts/surface topology mig
//
// A name declared in several files of a package (a cgo and a stub build of
// the same function) counts once. Test files, testdata and the examples
// are left out. It also lists every library file longer than maxLines
// lines, and then exits 1; otherwise it exits 1 only when a directory
// cannot be parsed. (A count over its target is printed, not failed.)
package main

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// targets are the most exported names each package should have.
var targets = map[string]int{
	"topology":        60,
	"mig":             90,
	"provider/nvidia": 40,
	"scoring":         45,
	"gang":            70,
	"gang/queue":      43,
	"gang/noderule":   19,
}

// maxLines is the most lines a library file (not a test) may have.
const maxLines = 1000

func main() {
	if err := run(os.Stdout, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "surface:", err)
		os.Exit(1)
	}
}

func run(w io.Writer, dirs []string) error {
	if len(dirs) == 0 {
		all, err := packageDirs(".")
		if err != nil {
			return err
		}
		dirs = all
	}
	var long []string
	for _, dir := range dirs {
		n, err := count(dir)
		if err != nil {
			return err
		}
		if n == 0 {
			continue
		}
		files, err := longFiles(dir)
		if err != nil {
			return err
		}
		long = append(long, files...)
		line := fmt.Sprintf("%-28s %4d", filepath.ToSlash(filepath.Clean(dir)), n)
		if t, ok := targets[filepath.ToSlash(filepath.Clean(dir))]; ok {
			verdict := "ok"
			if n > t {
				verdict = "over"
			}
			line += fmt.Sprintf("  target <= %d: %s", t, verdict)
		}
		fmt.Fprintln(w, line)
	}
	for _, f := range long {
		fmt.Fprintln(w, f)
	}
	if len(long) > 0 {
		return fmt.Errorf("%d library files are longer than %d lines", len(long), maxLines)
	}
	return nil
}

// longFiles lists the non-test Go files of dir longer than maxLines lines,
// each as "path: N lines, more than maxLines".
func longFiles(dir string) ([]string, error) {
	matches, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, err
	}
	var out []string
	for _, path := range matches {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		n := bytes.Count(src, []byte("\n"))
		if len(src) > 0 && src[len(src)-1] != '\n' {
			n++ // a last line without its newline
		}
		if n > maxLines {
			out = append(out, fmt.Sprintf("%s: %d lines, more than %d", filepath.ToSlash(path), n, maxLines))
		}
	}
	return out, nil
}

// packageDirs lists the directories under root holding non-test Go files,
// leaving out examples, scripts, testdata and hidden directories.
func packageDirs(root string) ([]string, error) {
	var dirs []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		name := d.Name()
		if path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "examples" || name == "scripts") {
			return filepath.SkipDir
		}
		matches, _ := filepath.Glob(filepath.Join(path, "*.go"))
		for _, m := range matches {
			if !strings.HasSuffix(m, "_test.go") {
				dirs = append(dirs, path)
				break
			}
		}
		return nil
	})
	slices.Sort(dirs)
	return dirs, err
}

// count returns the number of distinct exported top-level names declared in
// the non-test Go files of dir.
func count(dir string) (int, error) {
	fset := token.NewFileSet()
	matches, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return 0, err
	}
	names := map[string]bool{}
	for _, path := range matches {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return 0, err
		}
		if f.Name.Name == "main" {
			return 0, nil
		}
		for _, decl := range f.Decls {
			switch d := decl.(type) {
			case *ast.FuncDecl:
				if d.Recv == nil && d.Name.IsExported() {
					names[d.Name.Name] = true
				}
			case *ast.GenDecl:
				for _, spec := range d.Specs {
					switch s := spec.(type) {
					case *ast.TypeSpec:
						if s.Name.IsExported() {
							names[s.Name.Name] = true
						}
					case *ast.ValueSpec:
						for _, n := range s.Names {
							if n.IsExported() {
								names[n.Name] = true
							}
						}
					}
				}
			}
		}
	}
	return len(names), nil
}
