package clientgo

import (
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// featureTags are the client-go releases whose own feature table the port's minors follow.
var featureTags = []string{"v0.32.0", "v0.33.0", "v0.34.0", "v0.35.0", "v0.36.0", "v0.37.0-beta.0", "v0.37.2"}

// tagSpec is one gate's newest spec in one release's features/known_features.go: what that
// release, used standalone, runs with (features.unversionedFeatureGates keeps the last spec).
type tagSpec struct {
	version    [2]int
	preRelease string
	def, lock  bool
}

// moduleDir downloads k8s.io/client-go at tag through the go command (the module proxy, or
// GOPROXY as set) and returns where it was unpacked.
func moduleDir(tag string) string {
	cmd := exec.Command("go", "mod", "download", "-json", "k8s.io/client-go@"+tag)
	cmd.Dir = os.TempDir() // outside this module: go.mod and go.sum stay as they are
	cmd.Env = append(os.Environ(), "GOFLAGS=")
	out, err := cmd.Output()
	if err != nil {
		panic(fmt.Sprintf("go mod download k8s.io/client-go@%s: %v", tag, err))
	}
	var m struct{ Dir string }
	must(json.Unmarshal(out, &m))
	return m.Dir
}

// newestSpecs reads the default feature table of features/known_features.go, versioned
// (map[Feature]VersionedSpecs) or not (map[Feature]FeatureSpec), keeping each gate's newest spec.
func newestSpecs(path string) map[string]tagSpec {
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
	must(err)
	out := map[string]tagSpec{}
	ast.Inspect(f, func(n ast.Node) bool {
		vs, ok := n.(*ast.ValueSpec)
		if !ok || len(vs.Names) != 1 || !strings.HasPrefix(vs.Names[0].Name, "default") {
			return true
		}
		table, ok := vs.Values[0].(*ast.CompositeLit)
		if !ok {
			return true
		}
		for _, e := range table.Elts {
			kv := e.(*ast.KeyValueExpr)
			name := kv.Key.(*ast.Ident).Name
			specs := []*ast.CompositeLit{kv.Value.(*ast.CompositeLit)}
			if len(specs[0].Elts) > 0 {
				if _, nested := specs[0].Elts[0].(*ast.CompositeLit); nested {
					specs = nil
					for _, s := range kv.Value.(*ast.CompositeLit).Elts {
						specs = append(specs, s.(*ast.CompositeLit))
					}
				}
			}
			for _, s := range specs {
				spec := specFields(s)
				if old, seen := out[name]; !seen || !later(old.version, spec.version) {
					out[name] = spec
				}
			}
		}
		return false
	})
	return out
}

func later(a, b [2]int) bool { return a[0] > b[0] || a[0] == b[0] && a[1] > b[1] }

func specFields(lit *ast.CompositeLit) tagSpec {
	var s tagSpec
	for _, e := range lit.Elts {
		kv := e.(*ast.KeyValueExpr)
		switch kv.Key.(*ast.Ident).Name {
		case "Default":
			s.def = kv.Value.(*ast.Ident).Name == "true"
		case "LockToDefault":
			s.lock = kv.Value.(*ast.Ident).Name == "true"
		case "PreRelease":
			s.preRelease = map[string]string{"Alpha": "Alpha", "Beta": "Beta", "GA": "GA", "Deprecated": "Deprecated"}[kv.Value.(*ast.Ident).Name]
		case "Version":
			lit := kv.Value.(*ast.CallExpr).Args[0].(*ast.BasicLit).Value
			v, err := strconv.Unquote(lit)
			must(err)
			fmt.Sscanf(v, "%d.%d", &s.version[0], &s.version[1])
		}
	}
	return s
}

func init() {
	register("feature_gates_by_release", "each client-go release's own features/known_features.go (downloaded with go mod download, parsed with go/ast, not run): each informer gate's newest spec, which is what that release runs with standalone", func(t *testing.T, w *writer) {
		for _, tag := range featureTags {
			specs := newestSpecs(filepath.Join(moduleDir(tag), "features", "known_features.go"))
			for _, f := range modelled {
				s, ok := specs[string(f)]
				if !ok {
					w.printf("%s %s: not in the table", tag, f)
					continue
				}
				w.printf("%s %s: %s default=%s locked=%s", tag, f, s.preRelease, onOff(s.def), yesNo(s.lock))
			}
		}
	})
}
