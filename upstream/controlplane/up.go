package main

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// proc is one process the supervisor started, as current.json records it.
type proc struct {
	Name      string   `json:"name"`
	Pid       int      `json:"pid"`
	StartTime uint64   `json:"startTime"` // /proc/<pid>/stat field 22, to tell a reused pid
	URL       string   `json:"url"`
	Log       string   `json:"log"`
	Args      []string `json:"args"`

	cmd     *exec.Cmd
	done    chan struct{}
	waitErr error
}

// state is current.json: where a running control plane is.
type state struct {
	Ready              bool    `json:"ready"`
	KubernetesVersion  string  `json:"kubernetesVersion"`
	EtcdVersion        string  `json:"etcdVersion"`
	Kubeconfig         string  `json:"kubeconfig"`
	Server             string  `json:"server"`
	CAFile             string  `json:"caFile"`
	Kubectl            string  `json:"kubectl"`
	EtcdURL            string  `json:"etcdURL"`
	ProxyURL           string  `json:"proxyURL,omitempty"`
	CompactionInterval string  `json:"compactionInterval"`
	Supervisor         proc    `json:"supervisor"`
	Processes          []*proc `json:"processes"`
	LogsDir            string  `json:"logsDir"`
	StartedAt          string  `json:"startedAt"`
	ReadySeconds       float64 `json:"readySeconds,omitempty"`
}

type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, " ") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

type upOptions struct {
	root, dir          string
	detach, supervised bool
	compaction         time.Duration
	port               int
	advertise          string
	timeout, grace     time.Duration
	httpProxy          bool
	etcdArgs, apiArgs  multiFlag
	kcmArgs            multiFlag
}

// upFlags is up's flag set, writing into o.
func upFlags(o *upOptions, handling flag.ErrorHandling) *flag.FlagSet {
	fs := flag.NewFlagSet("up", handling)
	fs.StringVar(&o.root, "root", "", "the controlloop repository (default: found above the working directory)")
	fs.StringVar(&o.dir, "dir", "", "state directory (default: <root>/target/controlplane)")
	fs.BoolVar(&o.detach, "detach", false, "return once ready, leaving the supervisor running in the background (stop it with down)")
	fs.BoolVar(&o.supervised, "supervised", false, "internal: this is the background supervisor --detach started")
	fs.DurationVar(&o.compaction, "compaction-interval", 5*time.Minute, "kube-apiserver --etcd-compaction-interval (its default is 5m; 0 turns compaction off; short values let a test see a compacted resourceVersion answered with 410 Gone)")
	fs.IntVar(&o.port, "port", 0, "kube-apiserver secure port on 127.0.0.1 (0: a free one)")
	fs.StringVar(&o.advertise, "advertise-address", "", "kube-apiserver --advertise-address, only stored in the default/kubernetes endpoints, never connected to (default: unset, so the apiserver picks the host's address as under envtest; it refuses a loopback one)")
	fs.DurationVar(&o.timeout, "timeout", 2*time.Minute, "how long each process may take to become ready")
	fs.DurationVar(&o.grace, "grace", 20*time.Second, "how long a process may take to stop after SIGTERM before SIGKILL (envtest's StopTimeout is 20s)")
	fs.BoolVar(&o.httpProxy, "http-proxy", false, "also run 'kubectl proxy' on a free 127.0.0.1 port: the same API over plain HTTP, authenticated as the admin")
	fs.Var(&o.etcdArgs, "etcd-arg", "extra etcd flag, e.g. --etcd-arg=--log-level=debug (repeatable; after ours, so it wins)")
	fs.Var(&o.apiArgs, "apiserver-arg", "extra kube-apiserver flag (repeatable; after ours, so it wins)")
	fs.Var(&o.kcmArgs, "controller-manager-arg", "extra kube-controller-manager flag (repeatable; after ours, so it wins)")
	return fs
}

func cmdUp(args []string) error {
	var o upOptions
	fs := upFlags(&o, flag.ExitOnError)
	fs.Parse(args)
	if fs.NArg() > 0 {
		return exitError{2, "up: unexpected arguments: " + strings.Join(fs.Args(), " ")}
	}
	l, err := findLayout(o.root, o.dir)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(l.logs, 0o755); err != nil {
		return err
	}
	if o.detach && !o.supervised {
		return detach(l, &o, args)
	}
	return supervise(l, &o)
}

// supervisorArgs are the arguments of the supervisor that detach starts: up's
// own, less --detach, plus --supervised and the repository and state directory
// as the absolute paths this process resolved. The supervisor runs in the state
// directory, so a relative --dir or --root given here would be taken from there
// (target/x/target/x); the flag package keeps a repeated flag's last value, so
// the absolute ones, appended, win.
func supervisorArgs(l *layout, args []string) []string {
	childArgs := []string{"up", "--supervised"}
	for _, a := range args {
		if a == "--detach" || a == "-detach" || a == "--detach=true" || a == "-detach=true" {
			continue
		}
		childArgs = append(childArgs, a)
	}
	return append(childArgs, "--root", l.root, "--dir", l.base)
}

// detach builds (in the foreground, so its progress shows), then starts this
// same command as the supervisor in a new session with its output in
// logs/supervisor.log, and returns once current.json says it is ready.
func detach(l *layout, o *upOptions, args []string) error {
	if held, pid := lockHeld(l); held {
		return exitError{1, fmt.Sprintf("up: a control plane is already running (supervisor pid %d); run down first (status: %s)", pid, l.current)}
	}
	t0 := time.Now()
	if err := ensureBuilt(l, false, prefixed(os.Stdout, "up: ")); err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	logPath := filepath.Join(l.logs, "supervisor.log")
	logf, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.Command(self, supervisorArgs(l, args)...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	cmd.Dir = l.base
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("step 'start supervisor': %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case err := <-exited:
			return fmt.Errorf("the supervisor exited before the control plane was ready (%v); see %s:\n%s", err, logPath, tail(logPath, 25))
		case <-sigs:
			cmd.Process.Signal(syscall.SIGTERM)
			<-exited
			return exitError{130, "up: interrupted; the supervisor stopped what it had started"}
		case <-tick.C:
			st, err := readState(l)
			if err != nil || !st.Ready || st.Supervisor.Pid != cmd.Process.Pid {
				continue
			}
			fmt.Printf("up: ready in %s (supervisor pid %d in the background; log %s)\n", time.Since(t0).Round(10*time.Millisecond), cmd.Process.Pid, logPath)
			printWhere(st, l)
			return nil
		}
	}
}

func printWhere(st *state, l *layout) {
	fmt.Printf("server: %s\n", st.Server)
	if st.ProxyURL != "" {
		fmt.Printf("proxy: %s\n", st.ProxyURL)
	}
	fmt.Printf("kubectl: %s\n", st.Kubectl)
	fmt.Printf("current: %s\n", l.current)
	fmt.Printf("kubeconfig: %s\n", st.Kubeconfig)
}

var errInterrupted = errors.New("interrupted")

// supervisor is the process that starts and stops the control plane.
type supervisor struct {
	l      *layout
	o      *upOptions
	st     *state
	sigs   chan os.Signal
	exited chan *proc
	out    io.Writer
}

func supervise(l *layout, o *upOptions) (err error) {
	t0 := time.Now()
	out := prefixed(os.Stdout, "up: ")
	lock, err := takeLock(l)
	if err != nil {
		return err
	}
	defer lock.Close()
	s := &supervisor{l: l, o: o, sigs: make(chan os.Signal, 4), exited: make(chan *proc, 8), out: out}
	signal.Notify(s.sigs, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	reapOrphans(l, out)
	defer func() {
		s.stopAll()
		os.Remove(l.current)
		lock.Truncate(0)
		if errors.Is(err, errInterrupted) {
			fmt.Fprintln(out, "stopped")
			err = nil
		}
	}()

	if err := ensureBuilt(l, false, out); err != nil {
		return err
	}
	made, err := ensurePKI(l.pki)
	if err != nil {
		return fmt.Errorf("step 'certificates': %w (in %s)", err, l.pki)
	}
	if made {
		fmt.Fprintf(out, "certificates: made %s\n", l.pki)
	} else {
		fmt.Fprintf(out, "certificates: reused %s\n", l.pki)
	}
	ports, err := freePorts(5)
	if err != nil {
		return fmt.Errorf("step 'ports': %w", err)
	}
	if o.port != 0 {
		ports[2] = o.port
	}
	etcdURL := fmt.Sprintf("http://127.0.0.1:%d", ports[0])
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", ports[1])
	server := fmt.Sprintf("https://127.0.0.1:%d", ports[2])
	kcmURL := fmt.Sprintf("https://127.0.0.1:%d", ports[3])
	proxyURL := fmt.Sprintf("http://127.0.0.1:%d", ports[4])
	pki := func(name string) string { return filepath.Join(l.pki, name) }

	if err := writeKubeconfig(l.adminKC, server, l.pki, "controlloop-admin", pkiFiles.adminCrt, pkiFiles.adminKey); err != nil {
		return fmt.Errorf("step 'kubeconfig': %w", err)
	}
	if err := writeKubeconfig(l.kcmKC, server, l.pki, "system:kube-controller-manager", pkiFiles.kcmCrt, pkiFiles.kcmKey); err != nil {
		return fmt.Errorf("step 'kubeconfig': %w", err)
	}
	s.st = &state{
		KubernetesVersion:  kubernetesVersion,
		EtcdVersion:        etcdVersion,
		Kubeconfig:         l.adminKC,
		Server:             server,
		CAFile:             pki(pkiFiles.caCrt),
		Kubectl:            l.binary("kubectl"),
		EtcdURL:            etcdURL,
		CompactionInterval: o.compaction.String(),
		Supervisor:         proc{Name: "supervisor", Pid: os.Getpid(), StartTime: procStartTime(os.Getpid()), Log: filepath.Join(l.logs, "supervisor.log")},
		LogsDir:            l.logs,
		StartedAt:          t0.UTC().Format(time.RFC3339Nano),
	}
	if o.httpProxy {
		s.st.ProxyURL = proxyURL
	}

	// etcd: a fresh data directory every time and fsync off, as envtest
	// runs it; every listener on 127.0.0.1.
	if err := os.RemoveAll(l.etcdData); err != nil {
		return fmt.Errorf("step 'etcd data directory': %w", err)
	}
	etcd := &proc{Name: "etcd", URL: etcdURL, Args: append([]string{
		"--name=controlloop",
		"--data-dir=" + l.etcdData,
		"--listen-client-urls=" + etcdURL,
		"--advertise-client-urls=" + etcdURL,
		"--listen-peer-urls=" + peerURL,
		"--initial-advertise-peer-urls=" + peerURL,
		"--initial-cluster=controlloop=" + peerURL,
		"--unsafe-no-fsync=true",
	}, o.etcdArgs...)}
	if err := s.startAndWait(etcd, func() error { return checkEtcd(etcdURL) }); err != nil {
		return err
	}

	tlsAdmin, err := adminTLS(l)
	if err != nil {
		return fmt.Errorf("step 'certificates': %w", err)
	}
	api := &proc{Name: "kube-apiserver", URL: server, Args: append([]string{
		"--etcd-servers=" + etcdURL,
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(ports[2]),
		"--tls-cert-file=" + pki(pkiFiles.servingCrt),
		"--tls-private-key-file=" + pki(pkiFiles.servingKey),
		"--client-ca-file=" + pki(pkiFiles.caCrt),
		"--authorization-mode=RBAC",
		"--service-account-issuer=" + server + "/",
		"--service-account-key-file=" + pki(pkiFiles.saPub),
		"--service-account-signing-key-file=" + pki(pkiFiles.saKey),
		"--service-cluster-ip-range=10.0.0.0/24",
		"--allow-privileged=true",
		"--disable-admission-plugins=ServiceAccount",
		"--etcd-compaction-interval=" + o.compaction.String(),
	}, o.apiArgs...)}
	if o.advertise != "" {
		api.Args = append(api.Args[:len(api.Args)-len(o.apiArgs)], append([]string{"--advertise-address=" + o.advertise}, o.apiArgs...)...)
	}
	if err := s.startAndWait(api, func() error { return checkHTTP(tlsAdmin, server+"/readyz") }); err != nil {
		return err
	}

	kcm := &proc{Name: "kube-controller-manager", URL: kcmURL, Args: append([]string{
		"--kubeconfig=" + l.kcmKC,
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(ports[3]),
		"--tls-cert-file=" + pki(pkiFiles.servingCrt),
		"--tls-private-key-file=" + pki(pkiFiles.servingKey),
		"--controllers=garbage-collector-controller,namespace-controller",
		"--use-service-account-credentials=true",
		"--leader-elect=false",
	}, o.kcmArgs...)}
	if err := s.startAndWait(kcm, func() error { return checkHTTP(tlsAdmin, kcmURL+"/healthz") }); err != nil {
		return err
	}

	if o.httpProxy {
		px := &proc{Name: "kubectl-proxy", URL: proxyURL, Args: []string{
			"proxy",
			"--kubeconfig=" + l.adminKC,
			"--address=127.0.0.1",
			"--port=" + strconv.Itoa(ports[4]),
		}}
		if err := s.startAndWait(px, func() error { return checkHTTP(nil, proxyURL+"/readyz") }); err != nil {
			return err
		}
	}

	s.st.Ready = true
	s.st.ReadySeconds = time.Since(t0).Seconds()
	if err := writeState(l, s.st); err != nil {
		return err
	}
	fmt.Fprintf(out, "ready in %s\n", time.Since(t0).Round(10*time.Millisecond))
	printWhere(s.st, l)
	return s.run()
}

// run waits for a signal or for a process to exit, which ends the run.
func (s *supervisor) run() error {
	select {
	case sig := <-s.sigs:
		fmt.Fprintf(s.out, "%s: stopping\n", sig)
		return errInterrupted
	case p := <-s.exited:
		return fmt.Errorf("%s (pid %d) exited unexpectedly (%v); stopping the rest; see %s:\n%s", p.Name, p.Pid, p.waitErr, p.Log, tail(p.Log, 20))
	}
}

func (s *supervisor) startAndWait(p *proc, ready func() error) error {
	binName := p.Name
	if p.Name == "kubectl-proxy" {
		binName = "kubectl"
	}
	p.Log = filepath.Join(s.l.logs, p.Name+".log")
	logf, err := os.Create(p.Log)
	if err != nil {
		return fmt.Errorf("step 'start %s': %w", p.Name, err)
	}
	defer logf.Close()
	fmt.Fprintf(logf, "# %s %s\n", s.l.binary(binName), strings.Join(p.Args, " "))
	p.cmd = exec.Command(s.l.binary(binName), p.Args...)
	p.cmd.Stdout, p.cmd.Stderr = logf, logf
	p.cmd.Dir = s.l.base
	p.cmd.Env = childEnv()
	// Its own process group, as envtest starts its processes, so that a
	// terminal's Ctrl-C reaches only the supervisor, which then stops each
	// in turn; and SIGKILL should the supervisor die without doing so.
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	t0 := time.Now()
	if err := p.cmd.Start(); err != nil {
		return fmt.Errorf("step 'start %s': %w; see %s", p.Name, err, p.Log)
	}
	p.Pid = p.cmd.Process.Pid
	p.StartTime = procStartTime(p.Pid)
	p.done = make(chan struct{})
	go func() {
		p.waitErr = p.cmd.Wait()
		close(p.done)
		s.exited <- p
	}()
	s.st.Processes = append(s.st.Processes, p)
	if err := writeState(s.l, s.st); err != nil {
		return err
	}
	fmt.Fprintf(s.out, "%s: started pid %d, log %s\n", p.Name, p.Pid, p.Log)

	deadline := time.After(s.o.timeout)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		select {
		case sig := <-s.sigs:
			fmt.Fprintf(s.out, "%s while waiting for %s: stopping\n", sig, p.Name)
			return errInterrupted
		case <-p.done:
			<-s.exited
			return fmt.Errorf("step 'wait for %s': it exited (%v) before it was ready; see %s:\n%s", p.Name, p.waitErr, p.Log, tail(p.Log, 25))
		case <-deadline:
			return fmt.Errorf("step 'wait for %s': not ready after %s (last check: %v); see %s:\n%s", p.Name, s.o.timeout, last, p.Log, tail(p.Log, 25))
		case <-tick.C:
			if last = ready(); last == nil {
				fmt.Fprintf(s.out, "%s: ready in %s at %s\n", p.Name, time.Since(t0).Round(10*time.Millisecond), p.URL)
				return nil
			}
		}
	}
}

// stopAll stops the processes newest first: SIGTERM to the process group,
// then SIGKILL after the grace period.
func (s *supervisor) stopAll() {
	if s.st == nil {
		return
	}
	for i := len(s.st.Processes) - 1; i >= 0; i-- {
		p := s.st.Processes[i]
		select {
		case <-p.done:
			continue
		default:
		}
		t0 := time.Now()
		syscall.Kill(-p.Pid, syscall.SIGTERM)
		select {
		case <-p.done:
			fmt.Fprintf(s.out, "%s: stopped in %s\n", p.Name, time.Since(t0).Round(10*time.Millisecond))
		case <-time.After(s.o.grace):
			syscall.Kill(-p.Pid, syscall.SIGKILL)
			<-p.done
			fmt.Fprintf(s.out, "%s: killed after %s\n", p.Name, s.o.grace)
		}
	}
}

// childEnv is the environment without proxy settings, so that nothing a
// child starts is sent anywhere but to 127.0.0.1.
func childEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch strings.ToUpper(k) {
		case "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY", "KUBECONFIG":
			continue
		}
		env = append(env, kv)
	}
	return append(env, "NO_PROXY=127.0.0.1,localhost")
}

func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	var ports []int
	for i := 0; i < n; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

func adminTLS(l *layout) (*tls.Config, error) {
	pair, err := tls.LoadX509KeyPair(filepath.Join(l.pki, pkiFiles.adminCrt), filepath.Join(l.pki, pkiFiles.adminKey))
	if err != nil {
		return nil, err
	}
	caPEM, err := os.ReadFile(filepath.Join(l.pki, pkiFiles.caCrt))
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	return &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{pair}}, nil
}

func checkHTTP(tc *tls.Config, url string) error {
	tr := &http.Transport{TLSClientConfig: tc, Proxy: nil}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr, Timeout: 2 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s: %s", url, resp.Status, strings.TrimSpace(string(body)))
	}
	return nil
}

func checkEtcd(url string) error {
	c := &http.Client{Transport: &http.Transport{Proxy: nil}, Timeout: 2 * time.Second}
	resp, err := c.Get(url + "/health")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var h struct {
		Health string `json:"health"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil {
		return err
	}
	if h.Health != "true" {
		return fmt.Errorf("etcd /health: %q", h.Health)
	}
	return nil
}

// prefixed writes each line with a prefix.
type prefixWriter struct {
	w      io.Writer
	prefix string
}

func prefixed(w io.Writer, prefix string) io.Writer { return &prefixWriter{w, prefix} }

func (p *prefixWriter) Write(b []byte) (int, error) {
	for _, ln := range strings.SplitAfter(string(b), "\n") {
		if ln == "" {
			continue
		}
		if _, err := io.WriteString(p.w, p.prefix+ln); err != nil {
			return 0, err
		}
	}
	return len(b), nil
}
