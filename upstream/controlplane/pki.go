package main

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// The certificates follow envtest's tiny CA (controller-runtime v0.25.x,
// pkg/internal/testing/certs/tinyca.go) in kind: ECDSA P-256 keys, one CA
// signing a serving certificate for localhost and the listen address and
// client certificates whose CN is the user and O its groups, and a separate
// key pair for service-account tokens. Unlike envtest they are kept between
// runs, so they last a year and are made anew when less than a day remains.
const (
	certValidity = 365 * 24 * time.Hour
	certMinLeft  = 24 * time.Hour
)

// pkiFiles names the files under target/controlplane/pki.
var pkiFiles = struct {
	caCrt, caKey, servingCrt, servingKey, saKey, saPub, adminCrt, adminKey, kcmCrt, kcmKey string
}{
	"ca.crt", "ca.key", "apiserver.crt", "apiserver.key", "sa.key", "sa.pub",
	"admin.crt", "admin.key", "kube-controller-manager.crt", "kube-controller-manager.key",
}

// ensurePKI makes the certificates unless the ones on disk are whole, chain to
// the CA and have more than a day left. It reports whether it made them.
func ensurePKI(dir string) (bool, error) {
	if err := checkPKI(dir); err == nil {
		return false, nil
	}
	tmp := dir + ".new"
	if err := os.RemoveAll(tmp); err != nil {
		return false, err
	}
	if err := os.MkdirAll(tmp, 0o700); err != nil {
		return false, err
	}
	if err := writePKI(tmp); err != nil {
		return false, err
	}
	if err := os.RemoveAll(dir); err != nil {
		return false, err
	}
	return true, os.Rename(tmp, dir)
}

func checkPKI(dir string) error {
	ca, err := readCert(filepath.Join(dir, pkiFiles.caCrt))
	if err != nil {
		return err
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	now := time.Now()
	if now.Add(certMinLeft).After(ca.NotAfter) {
		return errors.New("CA expiring")
	}
	for _, leaf := range []struct {
		crt, key string
		usage    x509.ExtKeyUsage
	}{
		{pkiFiles.servingCrt, pkiFiles.servingKey, x509.ExtKeyUsageServerAuth},
		{pkiFiles.adminCrt, pkiFiles.adminKey, x509.ExtKeyUsageClientAuth},
		{pkiFiles.kcmCrt, pkiFiles.kcmKey, x509.ExtKeyUsageClientAuth},
	} {
		c, err := readCert(filepath.Join(dir, leaf.crt))
		if err != nil {
			return err
		}
		if now.Add(certMinLeft).After(c.NotAfter) {
			return errors.New(leaf.crt + " expiring")
		}
		if _, err := c.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{leaf.usage}}); err != nil {
			return err
		}
		if _, err := os.Stat(filepath.Join(dir, leaf.key)); err != nil {
			return err
		}
	}
	for _, f := range []string{pkiFiles.caKey, pkiFiles.saKey, pkiFiles.saPub} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			return err
		}
	}
	return nil
}

func readCert(path string) (*x509.Certificate, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	block, _ := pem.Decode(data)
	if block == nil || block.Type != "CERTIFICATE" {
		return nil, fmt.Errorf("%s: no certificate", path)
	}
	return x509.ParseCertificate(block.Bytes)
}

type keyPair struct {
	cert *x509.Certificate
	der  []byte
	key  *ecdsa.PrivateKey
}

func newKey() (*ecdsa.PrivateKey, error) { return ecdsa.GenerateKey(elliptic.P256(), rand.Reader) }

func serial() (*big.Int, error) { return rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128)) }

func sign(tmpl *x509.Certificate, parent *keyPair) (*keyPair, error) {
	key, err := newKey()
	if err != nil {
		return nil, err
	}
	if tmpl.SerialNumber, err = serial(); err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl.NotBefore = now.Add(-time.Hour).UTC() // tolerate a little clock skew
	tmpl.NotAfter = now.Add(certValidity).UTC()
	var signer crypto.Signer = key
	parentCert := tmpl
	if parent != nil {
		signer, parentCert = parent.key, parent.cert
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parentCert, key.Public(), signer)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &keyPair{cert: cert, der: der, key: key}, nil
}

func (k *keyPair) write(dir, crtName, keyName string) error {
	keyDER, err := x509.MarshalECPrivateKey(k.key)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, crtName), pemBytes("CERTIFICATE", k.der), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, keyName), pemBytes("EC PRIVATE KEY", keyDER), 0o600)
}

func pemBytes(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

func writePKI(dir string) error {
	ca, err := sign(&x509.Certificate{
		Subject:               pkix.Name{CommonName: "controlloop-controlplane-ca", Organization: []string{"controlloop"}},
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}, nil)
	if err != nil {
		return err
	}
	if err := ca.write(dir, pkiFiles.caCrt, pkiFiles.caKey); err != nil {
		return err
	}
	leaf := func(cn string, orgs []string, usage x509.ExtKeyUsage) *x509.Certificate {
		return &x509.Certificate{
			Subject:               pkix.Name{CommonName: cn, Organization: orgs},
			KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
			ExtKeyUsage:           []x509.ExtKeyUsage{usage},
			BasicConstraintsValid: true,
		}
	}
	serving := leaf("localhost", []string{"controlloop"}, x509.ExtKeyUsageServerAuth)
	serving.DNSNames = []string{"localhost"}
	serving.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1)}
	for _, c := range []struct {
		tmpl     *x509.Certificate
		crt, key string
	}{
		{serving, pkiFiles.servingCrt, pkiFiles.servingKey},
		// The admin user, as envtest's default user: in system:masters.
		{leaf("controlloop-admin", []string{"system:masters"}, x509.ExtKeyUsageClientAuth), pkiFiles.adminCrt, pkiFiles.adminKey},
		// kube-controller-manager's own identity, which the apiserver's
		// bootstrap RBAC policy already grants what the manager needs.
		{leaf("system:kube-controller-manager", nil, x509.ExtKeyUsageClientAuth), pkiFiles.kcmCrt, pkiFiles.kcmKey},
	} {
		kp, err := sign(c.tmpl, ca)
		if err != nil {
			return err
		}
		if err := kp.write(dir, c.crt, c.key); err != nil {
			return err
		}
	}
	// Service-account token signing: the apiserver signs with the private
	// key and verifies with the public one.
	sa, err := newKey()
	if err != nil {
		return err
	}
	saDER, err := x509.MarshalECPrivateKey(sa)
	if err != nil {
		return err
	}
	pubDER, err := x509.MarshalPKIXPublicKey(sa.Public())
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, pkiFiles.saKey), pemBytes("EC PRIVATE KEY", saDER), 0o600); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, pkiFiles.saPub), pemBytes("PUBLIC KEY", pubDER), 0o644)
}

// writeKubeconfig writes a kubeconfig for one user, its CA and client
// certificate embedded so that the file stands alone.
func writeKubeconfig(path, server, pkiDir, user, crtFile, keyFile string) error {
	read := func(name string) (string, error) {
		data, err := os.ReadFile(filepath.Join(pkiDir, name))
		return base64.StdEncoding.EncodeToString(data), err
	}
	ca, err := read(pkiFiles.caCrt)
	if err != nil {
		return err
	}
	crt, err := read(crtFile)
	if err != nil {
		return err
	}
	key, err := read(keyFile)
	if err != nil {
		return err
	}
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: controlloop-real
  cluster:
    server: %s
    certificate-authority-data: %s
users:
- name: %s
  user:
    client-certificate-data: %s
    client-key-data: %s
contexts:
- name: controlloop-real
  context:
    cluster: controlloop-real
    user: %s
current-context: controlloop-real
`, server, ca, user, crt, key, user)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(cfg), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
