package harness

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// etcdSecurity is a secured cluster's set-up, as a production cluster has
// it: members serve clients over TLS only and require a client certificate
// signed by the cluster's CA, and authentication is on, the harness
// signing in as root.
type etcdSecurity struct {
	dir                   string
	caFile                string
	serverCert, serverKey string
	clientCert, clientKey string
	clientTLS             *tls.Config
	rootPassword          string // set once authentication is on
	users                 int
	// added are the users AddUser created, for a cluster of the same
	// security that must let them in too (shard mode).
	added []etcdUser
}

// etcdUser is a user AddUser created: its password and the prefix its
// role may read and write.
type etcdUser struct{ name, password, prefix string }

// StartSecureEtcdCluster is StartEtcdCluster with TLS and authentication
// on: https client URLs, client certificates required, and etcd's users
// enabled with a root user the harness uses. Give a gateway access with
// AddUser and GatewayEtcdConfig.
func StartSecureEtcdCluster(t testing.TB, n int) *EtcdCluster {
	t.Helper()
	sec := newEtcdSecurity(t, t.TempDir())
	c := startEtcdCluster(t, n, sec)
	if err := c.enableAuth(t); err != nil {
		t.Fatalf("harness: enable etcd authentication: %v", err)
	}
	return c
}

// enableAuth creates root and turns authentication on.
func (c *EtcdCluster) enableAuth(t testing.TB) error {
	cli, err := c.newClient(c.Endpoints())
	if err != nil {
		return err
	}
	defer cli.Close()
	ctx := t.Context()
	pw := rand.Text()
	if _, err := cli.UserAdd(ctx, "root", pw); err != nil {
		return err
	}
	if _, err := cli.UserGrantRole(ctx, "root", "root"); err != nil {
		return err
	}
	if _, err := cli.AuthEnable(ctx); err != nil {
		return err
	}
	c.sec.rootPassword = pw
	return nil
}

// AddUser creates an etcd user whose role may read and write the keys
// under prefix and nothing else, and returns it with the file holding its
// password.
func (c *EtcdCluster) AddUser(t testing.TB, prefix string) (user, passwordFile string) {
	t.Helper()
	if c.sec == nil {
		t.Fatal("harness: AddUser needs a cluster from StartSecureEtcdCluster")
	}
	c.sec.users++
	user = fmt.Sprintf("gateway%d", c.sec.users)
	u := etcdUser{name: user, password: rand.Text(), prefix: prefix}
	c.addUser(t, u)
	c.sec.added = append(c.sec.added, u)
	passwordFile = filepath.Join(c.sec.dir, user+".password")
	if err := os.WriteFile(passwordFile, []byte(u.password+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return user, passwordFile
}

// addUser creates u with a role that may read and write the keys under
// its prefix and nothing else.
func (c *EtcdCluster) addUser(t testing.TB, u etcdUser) {
	t.Helper()
	cli := c.Client(t)
	ctx := t.Context()
	steps := []func() error{
		func() error { _, err := cli.RoleAdd(ctx, u.name); return err },
		func() error {
			_, err := cli.RoleGrantPermission(ctx, u.name, u.prefix, clientv3.GetPrefixRangeEnd(u.prefix), clientv3.PermissionType(clientv3.PermReadWrite))
			return err
		},
		func() error { _, err := cli.UserAdd(ctx, u.name, u.password); return err },
		func() error { _, err := cli.UserGrantRole(ctx, u.name, u.name); return err },
	}
	for _, step := range steps {
		if err := step(); err != nil {
			t.Fatalf("harness: etcd user %s: %v", u.name, err)
		}
	}
}

// startSiblingEtcdCluster starts a cluster of n members secured as c is
// (the same CA and certificates, authentication on with a root of its own
// and the users c's AddUser created), or in the clear when c is: a
// configuration that signs in to c signs in to it too.
func (c *EtcdCluster) startSiblingEtcdCluster(t testing.TB, n int) *EtcdCluster {
	t.Helper()
	if c == nil || c.sec == nil {
		return StartEtcdCluster(t, n)
	}
	sec := *c.sec
	sec.rootPassword, sec.users, sec.added = "", 0, nil
	sib := startEtcdCluster(t, n, &sec)
	if err := sib.enableAuth(t); err != nil {
		t.Fatalf("harness: enable etcd authentication: %v", err)
	}
	for _, u := range c.sec.added {
		sib.addUser(t, u)
	}
	return sib
}

// GatewayEtcdConfig is the etcd section of a gateway's configuration
// (Options.Config["etcd"]) that signs in as user over TLS.
func (c *EtcdCluster) GatewayEtcdConfig(user, passwordFile string) map[string]any {
	return map[string]any{
		"ca_file":       c.sec.caFile,
		"cert_file":     c.sec.clientCert,
		"key_file":      c.sec.clientKey,
		"username":      user,
		"password_file": passwordFile,
	}
}

// CAFile returns the file of the CA a secured cluster's certificates are
// signed by (empty for a cluster in the clear).
func (c *EtcdCluster) CAFile() string {
	if c.sec == nil {
		return ""
	}
	return c.sec.caFile
}

// newEtcdSecurity makes a CA and, signed by it, the members' server
// certificate (for the loopback names) and a client certificate, in dir.
func newEtcdSecurity(t testing.TB, dir string) *etcdSecurity {
	t.Helper()
	caKey, caDER := issue(t, &x509.Certificate{
		Subject:               pkix.Name{CommonName: "sweepgate e2e etcd CA"},
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}, nil, nil)
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	s := &etcdSecurity{dir: dir, caFile: filepath.Join(dir, "ca.crt")}
	writePEM(t, s.caFile, "CERTIFICATE", caDER)
	s.serverCert, s.serverKey = issueFiles(t, dir, "server", &x509.Certificate{
		Subject:     pkix.Name{CommonName: "etcd member"},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		DNSNames:    []string{"localhost"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
	}, ca, caKey)
	// The client certificate's name is no etcd user, so that it grants
	// nothing by itself: requests are allowed by the password sign-in.
	s.clientCert, s.clientKey = issueFiles(t, dir, "client", &x509.Certificate{
		Subject:     pkix.Name{CommonName: "no-such-user"},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, ca, caKey)
	pair, err := tls.LoadX509KeyPair(s.clientCert, s.clientKey)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	s.clientTLS = &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}
	return s
}

// issue creates tmpl's certificate, signed by parent (self-signed when nil),
// and returns its key and DER.
func issue(t testing.TB, tmpl, parent *x509.Certificate, parentKey *ecdsa.PrivateKey) (*ecdsa.PrivateKey, []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl.SerialNumber, err = rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		t.Fatal(err)
	}
	tmpl.NotBefore, tmpl.NotAfter = time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour)
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		t.Fatal(err)
	}
	return key, der
}

// issueFiles issues tmpl's certificate and writes it and its key as
// dir/name.crt and dir/name.key.
func issueFiles(t testing.TB, dir, name string, tmpl, ca *x509.Certificate, caKey *ecdsa.PrivateKey) (certFile, keyFile string) {
	t.Helper()
	key, der := issue(t, tmpl, ca, caKey)
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
	writePEM(t, certFile, "CERTIFICATE", der)
	writePEM(t, keyFile, "PRIVATE KEY", keyDER)
	return certFile, keyFile
}

func writePEM(t testing.TB, path, kind string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}
