package auth

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// credentialName matches identifiers that hold a secret or the proof of
// one: MACs, signatures, secrets, raw keys, key hashes, passwords.
var credentialName = regexp.MustCompile(`(?i)(mac|signature|sig|secret|password|rawkey|keyhash|apikey)$`)

// TestCredentialsAreComparedInConstantTime reads every non-test Go file of
// the module and fails on ==, != or bytes.Equal / strings.EqualFold where
// one side names a credential (credentialName): those must go through
// hmac.Equal or subtle.ConstantTimeCompare, so that how long a refusal
// takes says nothing about how much of a forgery was right. API keys are
// looked up by their SHA-256 (HashKey): the database compares hashes, which
// an attacker cannot steer byte by byte.
func TestCredentialsAreComparedInConstantTime(t *testing.T) {
	root := filepath.Join("..", "..")
	fset := token.NewFileSet()
	checked := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "node_modules" || d.Name() == "var") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		checked++
		ast.Inspect(f, func(n ast.Node) bool {
			switch x := n.(type) {
			case *ast.BinaryExpr:
				if (x.Op == token.EQL || x.Op == token.NEQ) && !isZero(x.X) && !isZero(x.Y) &&
					(namesCredential(x.X) || namesCredential(x.Y)) {
					t.Errorf("%s: %s compares a credential with %s; use hmac.Equal or subtle.ConstantTimeCompare",
						fset.Position(x.Pos()), exprName(x.X)+"/"+exprName(x.Y), x.Op)
				}
			case *ast.CallExpr:
				fn := exprName(x.Fun)
				if fn == "bytes.Equal" || fn == "strings.EqualFold" || fn == "reflect.DeepEqual" {
					for _, a := range x.Args {
						if namesCredential(a) {
							t.Errorf("%s: %s(%s): use hmac.Equal or subtle.ConstantTimeCompare", fset.Position(x.Pos()), fn, exprName(a))
						}
					}
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 50 {
		t.Fatalf("checked only %d files: wrong root?", checked)
	}
}

func namesCredential(e ast.Expr) bool {
	switch x := e.(type) {
	case *ast.CallExpr:
		// string(mac), []byte(sig): the conversion's argument.
		if len(x.Args) == 1 {
			return namesCredential(x.Args[0])
		}
	case *ast.SliceExpr:
		return namesCredential(x.X)
	}
	return credentialName.MatchString(exprName(e))
}

func isZero(e ast.Expr) bool {
	switch x := e.(type) {
	case *ast.Ident:
		return x.Name == "nil"
	case *ast.BasicLit:
		return x.Value == `""` || x.Value == "0"
	}
	return false
}

func exprName(e ast.Expr) string {
	switch x := e.(type) {
	case *ast.Ident:
		return x.Name
	case *ast.SelectorExpr:
		return exprName(x.X) + "." + x.Sel.Name
	case *ast.CallExpr:
		return exprName(x.Fun) + "()"
	case *ast.SliceExpr:
		return exprName(x.X) + "[:]"
	case *ast.IndexExpr:
		return exprName(x.X) + "[]"
	}
	return ""
}
