package main

import (
	"bytes"
	"flag"
	"fmt"
	"os/exec"
	"strings"
	"time"
)

// cmdSmoke checks a running control plane with the built kubectl: namespaces,
// a ConfigMap's create/get/delete, a CRD and one of its objects, the garbage
// collector deleting a dependent of a deleted owner, and the namespace
// controller emptying and removing a namespace. It leaves nothing behind.
func cmdSmoke(args []string) error {
	fs := flag.NewFlagSet("smoke", flag.ExitOnError)
	root := fs.String("root", "", "the controlloop repository (default: found above the working directory)")
	dir := fs.String("dir", "", "state directory (default: <root>/target/controlplane)")
	timeout := fs.Duration("timeout", 60*time.Second, "how long the garbage collector and the namespace controller may take")
	fs.Parse(args)
	l, err := findLayout(*root, *dir)
	if err != nil {
		return err
	}
	st, err := ready(l)
	if err != nil {
		return fmt.Errorf("smoke: %v", err)
	}
	kubectl := func(stdin string, args ...string) (string, error) {
		cmd := exec.Command(st.Kubectl, append([]string{"--kubeconfig", st.Kubeconfig}, args...)...)
		cmd.Env = childEnv()
		cmd.Stdin = strings.NewReader(stdin)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		fmt.Printf("$ kubectl %s\n%s", strings.Join(args, " "), indent(out.String()))
		if err != nil {
			return out.String(), fmt.Errorf("smoke: kubectl %s: %v", strings.Join(args, " "), err)
		}
		return out.String(), nil
	}
	gone := func(args ...string) error {
		t0 := time.Now()
		for time.Since(t0) < *timeout {
			cmd := exec.Command(st.Kubectl, append([]string{"--kubeconfig", st.Kubeconfig, "get"}, args...)...)
			cmd.Env = childEnv()
			out, _ := cmd.CombinedOutput()
			if strings.Contains(string(out), "NotFound") {
				fmt.Printf("  %s gone after %s\n", strings.Join(args, " "), time.Since(t0).Round(10*time.Millisecond))
				return nil
			}
			time.Sleep(100 * time.Millisecond)
		}
		return fmt.Errorf("smoke: %s still there after %s", strings.Join(args, " "), *timeout)
	}
	steps := []func() error{
		func() error { _, err := kubectl("", "version"); return err },
		func() error { _, err := kubectl("", "get", "ns"); return err },
		func() error { _, err := kubectl("", "create", "configmap", "smoke", "--from-literal=a=1"); return err },
		func() error {
			out, err := kubectl("", "get", "configmap", "smoke", "-o", "jsonpath={.data.a}{\"\\n\"}")
			if err == nil && strings.TrimSpace(out) != "1" {
				err = fmt.Errorf("smoke: configmap smoke has data.a %q", out)
			}
			return err
		},
		func() error { _, err := kubectl("", "delete", "configmap", "smoke"); return err },
		func() error { return gone("configmap", "smoke") },
		func() error { _, err := kubectl(smokeCRD, "apply", "-f", "-"); return err },
		func() error {
			_, err := kubectl("", "wait", "--for=condition=Established", "crd/widgets.smoke.controlloop.dev", "--timeout=60s")
			return err
		},
		func() error { _, err := kubectl(smokeWidget, "apply", "-f", "-"); return err },
		func() error { _, err := kubectl("", "get", "widgets"); return err },
		func() error { _, err := kubectl("", "create", "configmap", "smoke-owner"); return err },
		func() error {
			uid, err := kubectl("", "get", "configmap", "smoke-owner", "-o", "jsonpath={.metadata.uid}")
			if err != nil {
				return err
			}
			_, err = kubectl(fmt.Sprintf(smokeOwned, strings.TrimSpace(uid)), "apply", "-f", "-")
			return err
		},
		func() error { _, err := kubectl("", "get", "configmap", "smoke-owner", "smoke-owned"); return err },
		func() error { _, err := kubectl("", "delete", "configmap", "smoke-owner"); return err },
		func() error { return gone("configmap", "smoke-owned") }, // the garbage collector
		func() error { _, err := kubectl("", "create", "namespace", "smoke-ns"); return err },
		func() error { _, err := kubectl("", "-n", "smoke-ns", "create", "configmap", "inside"); return err },
		func() error { _, err := kubectl("", "delete", "namespace", "smoke-ns", "--wait=false"); return err },
		func() error { return gone("namespace", "smoke-ns") }, // the namespace controller
		func() error { _, err := kubectl("", "delete", "widgets", "w1"); return err },
		func() error { _, err := kubectl("", "delete", "crd", "widgets.smoke.controlloop.dev"); return err },
	}
	for _, step := range steps {
		if err := step(); err != nil {
			return err
		}
	}
	fmt.Println("smoke: ok")
	return nil
}

func indent(s string) string {
	if s == "" {
		return ""
	}
	return "  " + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n  ") + "\n"
}

const smokeCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.smoke.controlloop.dev
spec:
  group: smoke.controlloop.dev
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        x-kubernetes-preserve-unknown-fields: true
`

const smokeWidget = `apiVersion: smoke.controlloop.dev/v1
kind: Widget
metadata: {name: w1}
spec: {size: 3}
`

const smokeOwned = `apiVersion: v1
kind: ConfigMap
metadata:
  name: smoke-owned
  ownerReferences:
  - apiVersion: v1
    kind: ConfigMap
    name: smoke-owner
    uid: %s
data: {x: "1"}
`
