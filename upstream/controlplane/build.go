package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"
)

// target is one `go build` run: a build-only module and the packages it
// compiles, each to a named binary.
type target struct {
	module  string            // directory under build/
	outputs map[string]string // binary name -> package path
	tags    string
	ldflags string
}

// releaseTime is the publication time the module proxy gives for
// k8s.io/kubernetes v1.37.2; it stands in for the build date so that the
// binaries do not depend on when they were built.
const releaseTime = "2026-10-27T12:01:04Z"

func targets() []target {
	// Version stamping as Kubernetes' release build does it (hack/lib/version.sh
	// at v1.37.2): the same variables in component-base and client-go.
	var ld []string
	for _, pkg := range []string{"k8s.io/component-base/version", "k8s.io/client-go/pkg/version"} {
		for _, kv := range [][2]string{
			{"gitVersion", kubernetesVersion},
			{"gitMajor", "1"},
			{"gitMinor", "37"},
			{"gitTreeState", "clean"},
			{"buildDate", releaseTime},
		} {
			ld = append(ld, "-X", pkg+"."+kv[0]+"="+kv[1])
		}
	}
	return []target{
		{
			module: "etcd",
			outputs: map[string]string{
				"etcd": "go.etcd.io/etcd/server/v3",
			},
			ldflags: "-s -w",
		},
		{
			module: "kubernetes",
			outputs: map[string]string{
				"kube-apiserver":          "k8s.io/kubernetes/cmd/kube-apiserver",
				"kube-controller-manager": "k8s.io/kubernetes/cmd/kube-controller-manager",
				"kubectl":                 "k8s.io/kubernetes/cmd/kubectl",
			},
			// The tags and flags of Kubernetes' non-debug builds
			// (hack/lib/golang.sh at v1.37.2): static, stripped, trimmed paths.
			tags:    "selinux,notest,grpcnotrace",
			ldflags: "-s -w " + strings.Join(ld, " "),
		},
	}
}

var binaryNames = []string{"etcd", "kube-apiserver", "kube-controller-manager", "kubectl"}

// buildInputs is what a set of binaries was built from; the build is skipped
// when the recorded inputs equal the current ones and every binary is there.
type buildInputs struct {
	KubernetesVersion string            `json:"kubernetesVersion"`
	EtcdVersion       string            `json:"etcdVersion"`
	GoVersion         string            `json:"goVersion"`
	GOOS              string            `json:"goos"`
	GOARCH            string            `json:"goarch"`
	Modules           map[string]string `json:"modules"` // build/<dir>/go.{mod,sum} -> sha256
	Commands          []string          `json:"commands"`
}

type buildRecord struct {
	Inputs   buildInputs      `json:"inputs"`
	Binaries map[string]int64 `json:"binaries"` // name -> size
	Seconds  float64          `json:"seconds"`
	BuiltAt  string           `json:"builtAt"`
}

func buildArgs(t target, outDir string) []string {
	args := []string{"build", "-trimpath"}
	if t.tags != "" {
		args = append(args, "-tags="+t.tags)
	}
	args = append(args, "-ldflags="+t.ldflags, "-o", outDir+string(filepath.Separator))
	for _, name := range sortedKeys(t.outputs) {
		args = append(args, t.outputs[name])
	}
	return args
}

func currentInputs(l *layout, goBin string) (buildInputs, error) {
	out, err := exec.Command(goBin, "env", "GOVERSION", "GOOS", "GOARCH").Output()
	if err != nil {
		return buildInputs{}, fmt.Errorf("go env: %w", err)
	}
	f := strings.Fields(string(out))
	if len(f) != 3 {
		return buildInputs{}, fmt.Errorf("go env: unexpected output %q", out)
	}
	in := buildInputs{
		KubernetesVersion: kubernetesVersion,
		EtcdVersion:       etcdVersion,
		GoVersion:         f[0],
		GOOS:              f[1],
		GOARCH:            f[2],
		Modules:           map[string]string{},
	}
	for _, t := range targets() {
		for _, file := range []string{"go.mod", "go.sum"} {
			data, err := os.ReadFile(filepath.Join(l.buildDir, t.module, file))
			if err != nil {
				return buildInputs{}, err
			}
			sum := sha256.Sum256(data)
			in.Modules[t.module+"/"+file] = hex.EncodeToString(sum[:])
		}
		in.Commands = append(in.Commands, "CGO_ENABLED=0 go "+strings.Join(buildArgs(t, "OUT"), " "))
	}
	return in, nil
}

func recordPath(l *layout) string { return filepath.Join(l.bin, "build-inputs.json") }

// upToDate reports whether the binaries under l.bin were built from in.
func upToDate(l *layout, in buildInputs) bool {
	data, err := os.ReadFile(recordPath(l))
	if err != nil {
		return false
	}
	var rec buildRecord
	if json.Unmarshal(data, &rec) != nil {
		return false
	}
	a, _ := json.Marshal(rec.Inputs)
	b, _ := json.Marshal(in)
	if !bytes.Equal(a, b) {
		return false
	}
	for _, name := range binaryNames {
		st, err := os.Stat(l.binary(name))
		if err != nil || st.Size() != rec.Binaries[name] {
			return false
		}
	}
	return true
}

func cmdBuild(args []string) error {
	fs := flag.NewFlagSet("build", flag.ExitOnError)
	root := fs.String("root", "", "the controlloop repository (default: found above the working directory)")
	dir := fs.String("dir", "", "state directory (default: <root>/target/controlplane)")
	force := fs.Bool("force", false, "build even when the recorded inputs match")
	fs.Parse(args)
	l, err := findLayout(*root, *dir)
	if err != nil {
		return err
	}
	return ensureBuilt(l, *force, os.Stdout)
}

// ensureBuilt builds the binaries unless they are up to date. Progress goes to
// w; the go commands' output goes to logs/build.log (and, on failure, its tail
// to the error).
func ensureBuilt(l *layout, force bool, w io.Writer) error {
	goBin, err := exec.LookPath("go")
	if err != nil {
		return fmt.Errorf("step 'build': the go command is not on PATH: %w", err)
	}
	in, err := currentInputs(l, goBin)
	if err != nil {
		return fmt.Errorf("step 'build': %w", err)
	}
	if !force && upToDate(l, in) {
		fmt.Fprintf(w, "build: up to date: %s (Kubernetes %s, etcd %s, %s)\n", l.bin, kubernetesVersion, etcdVersion, in.GoVersion)
		return nil
	}
	if err := os.MkdirAll(l.logs, 0o755); err != nil {
		return err
	}
	logPath := filepath.Join(l.logs, "build.log")
	logf, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer logf.Close()

	os.Remove(recordPath(l))
	partial := filepath.Join(l.bin, ".partial")
	if err := os.RemoveAll(partial); err != nil {
		return err
	}
	if err := os.MkdirAll(partial, 0o755); err != nil {
		return err
	}
	start := time.Now()
	for _, t := range targets() {
		args := buildArgs(t, partial)
		fmt.Fprintf(w, "build: %s (module build/%s) ...\n", strings.Join(sortedKeys(t.outputs), ", "), t.module)
		fmt.Fprintf(logf, "$ cd %s && CGO_ENABLED=0 GOWORK=off go %s\n", filepath.Join(l.buildDir, t.module), strings.Join(args, " "))
		cmd := exec.Command(goBin, args...)
		cmd.Dir = filepath.Join(l.buildDir, t.module)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOWORK=off")
		cmd.Stdout, cmd.Stderr = logf, logf
		t0 := time.Now()
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("step 'build %s': %v; see %s:\n%s", t.module, err, logPath, tail(logPath, 30))
		}
		fmt.Fprintf(w, "build: %s done in %s\n", t.module, time.Since(t0).Round(100*time.Millisecond))
	}
	// go build names a module-root main package after its path's last
	// element before the major-version suffix ("server" for etcd).
	rec := buildRecord{Inputs: in, Binaries: map[string]int64{}}
	for _, t := range targets() {
		for name, pkg := range t.outputs {
			src := filepath.Join(partial, defaultBinaryName(pkg))
			if err := os.Rename(src, l.binary(name)); err != nil {
				return fmt.Errorf("step 'build': %w", err)
			}
			st, err := os.Stat(l.binary(name))
			if err != nil {
				return err
			}
			rec.Binaries[name] = st.Size()
		}
	}
	os.RemoveAll(partial)
	rec.Seconds = time.Since(start).Seconds()
	rec.BuiltAt = time.Now().UTC().Format(time.RFC3339)
	data, _ := json.MarshalIndent(rec, "", "  ")
	if err := os.WriteFile(recordPath(l), append(data, '\n'), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(w, "build: done in %s: %s\n", time.Since(start).Round(time.Second), l.bin)
	return nil
}

// defaultBinaryName is the file name go build -o DIR/ gives a main package.
func defaultBinaryName(pkg string) string {
	elem := filepath.Base(pkg)
	if len(elem) >= 2 && elem[0] == 'v' && strings.Trim(elem[1:], "0123456789") == "" {
		elem = filepath.Base(filepath.Dir(pkg))
	}
	if runtime.GOOS == "windows" {
		elem += ".exe"
	}
	return elem
}
