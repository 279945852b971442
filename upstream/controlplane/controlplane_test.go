package main

import (
	"crypto/x509"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestPKIIsMadeOnceAndReused(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "pki")
	made, err := ensurePKI(dir)
	if err != nil || !made {
		t.Fatalf("first ensurePKI: made=%v err=%v", made, err)
	}
	made, err = ensurePKI(dir)
	if err != nil || made {
		t.Fatalf("second ensurePKI: made=%v err=%v, want reuse", made, err)
	}
	serving, err := readCert(filepath.Join(dir, pkiFiles.servingCrt))
	if err != nil {
		t.Fatal(err)
	}
	if err := serving.VerifyHostname("127.0.0.1"); err != nil {
		t.Error(err)
	}
	if err := serving.VerifyHostname("localhost"); err != nil {
		t.Error(err)
	}
	admin, err := readCert(filepath.Join(dir, pkiFiles.adminCrt))
	if err != nil {
		t.Fatal(err)
	}
	if got := admin.Subject.Organization; len(got) != 1 || got[0] != "system:masters" {
		t.Errorf("admin O = %v", got)
	}
	if admin.ExtKeyUsage[0] != x509.ExtKeyUsageClientAuth {
		t.Errorf("admin usage = %v", admin.ExtKeyUsage)
	}
	// A missing file makes the whole set anew.
	os.Remove(filepath.Join(dir, pkiFiles.saPub))
	if made, err := ensurePKI(dir); err != nil || !made {
		t.Fatalf("after removing sa.pub: made=%v err=%v", made, err)
	}
}

func TestKubeconfigEmbedsCredentials(t *testing.T) {
	dir := t.TempDir()
	pki := filepath.Join(dir, "pki")
	if _, err := ensurePKI(pki); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "admin.kubeconfig")
	if err := writeKubeconfig(path, "https://127.0.0.1:6443", pki, "controlloop-admin", pkiFiles.adminCrt, pkiFiles.adminKey); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"server: https://127.0.0.1:6443", "certificate-authority-data: ", "client-certificate-data: ", "client-key-data: ", "current-context: controlloop-real"} {
		if !strings.Contains(string(data), want) {
			t.Errorf("kubeconfig lacks %q", want)
		}
	}
}

func TestDefaultBinaryName(t *testing.T) {
	for pkg, want := range map[string]string{
		"go.etcd.io/etcd/server/v3":            "server",
		"k8s.io/kubernetes/cmd/kube-apiserver": "kube-apiserver",
		"k8s.io/kubernetes/cmd/kubectl":        "kubectl",
	} {
		if got := defaultBinaryName(pkg); got != want {
			t.Errorf("defaultBinaryName(%q) = %q, want %q", pkg, got, want)
		}
	}
}

func TestBuildModulesReplaceEveryStagingModule(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("build", "kubernetes", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) == 4 && f[1] == "=>" && strings.HasPrefix(f[0], "k8s.io/") {
			if f[0] != f[2] || f[3] != "v0.37.2" {
				t.Errorf("replace line %q: want %s => %s v0.37.2", line, f[0], f[0])
			}
			n++
		}
	}
	if n != 31 {
		t.Errorf("%d staging replaces, want 31", n)
	}
	if !requires(string(data), "k8s.io/kubernetes", kubernetesVersion) {
		t.Errorf("build/kubernetes/go.mod does not require k8s.io/kubernetes %s", kubernetesVersion)
	}
	etcd, err := os.ReadFile(filepath.Join("build", "etcd", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	if !requires(string(etcd), "go.etcd.io/etcd/server/v3", etcdVersion) {
		t.Errorf("build/etcd/go.mod does not require etcd server %s", etcdVersion)
	}
}

func TestChildEnvDropsProxies(t *testing.T) {
	t.Setenv("HTTPS_PROXY", "http://192.0.2.9:3128")
	t.Setenv("http_proxy", "http://192.0.2.9:3128")
	t.Setenv("KUBECONFIG", "/elsewhere")
	for _, kv := range childEnv() {
		k, _, _ := strings.Cut(kv, "=")
		switch strings.ToUpper(k) {
		case "HTTPS_PROXY", "HTTP_PROXY", "KUBECONFIG":
			t.Errorf("child environment keeps %s", kv)
		}
	}
}

// requires reports whether a go.mod requires module at version (in a block,
// where go mod tidy marks a tool's module "// indirect").
func requires(gomod, module, version string) bool {
	for _, line := range strings.Split(gomod, "\n") {
		f := strings.Fields(strings.TrimPrefix(strings.TrimSpace(line), "require "))
		if len(f) >= 2 && f[0] == module && f[1] == version {
			return true
		}
	}
	return false
}

// The supervisor that up --detach starts runs in the state directory, so a relative --dir
// reaches it as the absolute path the caller's up resolved, not as typed (which, taken
// from the state directory, would double: state/state).
func TestDetachedSupervisorGetsTheCallersStateDirectory(t *testing.T) {
	repo, err := findLayout("", "")
	if err != nil {
		t.Fatal(err)
	}
	caller := t.TempDir()
	t.Chdir(caller)
	if err := os.Mkdir("state", 0o755); err != nil {
		t.Fatal(err)
	}
	l, err := findLayout(repo.root, "state")
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(caller, "state"); l.base != want {
		t.Fatalf("the caller's layout: base %s, want %s", l.base, want)
	}
	args := supervisorArgs(l, []string{"--detach", "--dir", "state", "--compaction-interval", "5s"})
	if args[0] != "up" {
		t.Fatalf("the supervisor's verb: %q", args[0])
	}
	var o upOptions
	if err := upFlags(&o, flag.ContinueOnError).Parse(args[1:]); err != nil {
		t.Fatal(err)
	}
	if o.detach || !o.supervised || o.compaction != 5*time.Second {
		t.Fatalf("the supervisor's flags: detach %v, supervised %v, compaction %v", o.detach, o.supervised, o.compaction)
	}
	t.Chdir(l.base) // where the supervisor runs
	theirs, err := findLayout(o.root, o.dir)
	if err != nil {
		t.Fatal(err)
	}
	if theirs.base != l.base || theirs.root != l.root {
		t.Fatalf("the supervisor's layout: base %s root %s, want base %s root %s", theirs.base, theirs.root, l.base, l.root)
	}
}
