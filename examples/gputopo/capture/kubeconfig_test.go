package capture

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// tlsAPI starts a TLS fake API server that asks for client certificates
// (optional) and returns it with its CA certificate in PEM.
func tlsAPI(t *testing.T, f *fakeAPI, wantClientCert bool) (*httptest.Server, []byte) {
	t.Helper()
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if wantClientCert && (r.TLS == nil || len(r.TLS.PeerCertificates) == 0) {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		f.ServeHTTP(w, r)
	})
	srv := httptest.NewUnstartedServer(h)
	srv.TLS = &tls.Config{ClientAuth: tls.RequestClientCert}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
}

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
	return p
}

func TestKubeconfigTokenFileAndCAFile(t *testing.T) {
	nodes, pods := cluster(t)
	f := &fakeAPI{nodes: nodes, pods: pods, token: "tok-123"}
	srv, ca := tlsAPI(t, f, false)
	dir := t.TempDir()
	writeFile(t, dir, "ca.pem", string(ca))
	writeFile(t, dir, "token", "tok-123\n")
	kc := writeFile(t, dir, "config", fmt.Sprintf(`apiVersion: v1
kind: Config
current-context: other
clusters:
- name: c1
  cluster: {server: %q, certificate-authority: ca.pem}
- name: unused
  cluster: {server: "https://unused.invalid"}
users:
- name: u1
  user: {tokenFile: token}
contexts:
- name: main
  context: {cluster: c1, user: u1}
- name: other
  context: {cluster: unused, user: u1}
`, srv.URL))
	c, err := LoadKubeconfig(kc, "main")
	require.NoError(t, err)
	res, err := c.Capture(bg, Options{})
	require.NoError(t, err)
	assert.Len(t, res.Cluster.Nodes, 4)

	// The current context points elsewhere.
	c, err = LoadKubeconfig(kc, "")
	require.NoError(t, err)
	assert.Equal(t, "unused.invalid", c.server.Host)
	_, err = LoadKubeconfig(kc, "nope")
	require.ErrorIs(t, err, ErrConfig)
}

func TestKubeconfigClientCertAndInlineCA(t *testing.T) {
	nodes, pods := cluster(t)
	srv, ca := tlsAPI(t, &fakeAPI{nodes: nodes, pods: pods}, true)
	// The server's own key pair serves as the client certificate.
	cert := srv.TLS.Certificates[0]
	keyDER, err := x509.MarshalPKCS8PrivateKey(cert.PrivateKey)
	require.NoError(t, err)
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Certificate[0]})
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})
	b64 := base64.StdEncoding.EncodeToString
	dir := t.TempDir()
	doc := fmt.Sprintf(`current-context: x
clusters: [{name: c, cluster: {server: %q, certificate-authority-data: %s}}]
users: [{name: u, user: {client-certificate-data: %s, client-key-data: %s}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
`, srv.URL, b64(ca), b64(certPEM), b64(keyPEM))
	c, err := LoadKubeconfig(writeFile(t, dir, "config", doc), "")
	require.NoError(t, err)
	_, err = c.Capture(bg, Options{})
	require.NoError(t, err)

	// Without the certificate the server refuses.
	anon := fmt.Sprintf(`current-context: x
clusters: [{name: c, cluster: {server: %q, certificate-authority-data: %s}}]
contexts: [{name: x, context: {cluster: c}}]
`, srv.URL, b64(ca))
	c, err = LoadKubeconfig(writeFile(t, dir, "anon", anon), "")
	require.NoError(t, err)
	_, err = c.Capture(bg, Options{})
	require.ErrorIs(t, err, ErrAPI)
	assert.Contains(t, err.Error(), "401")
}

func TestKubeconfigErrors(t *testing.T) {
	dir := t.TempDir()
	for name, doc := range map[string]string{
		"no current context": `clusters: []`,
		"missing cluster":    `{current-context: x, contexts: [{name: x, context: {cluster: c}}]}`,
		"missing user":       `{current-context: x, contexts: [{name: x, context: {cluster: c, user: u}}], clusters: [{name: c, cluster: {server: "https://h"}}]}`,
		"exec plugin": `{current-context: x, contexts: [{name: x, context: {cluster: c, user: u}}], clusters: [{name: c, cluster: {server: "https://h"}}],
			users: [{name: u, user: {exec: {command: aws}}}]}`,
		"bad CA":         `{current-context: x, contexts: [{name: x, context: {cluster: c}}], clusters: [{name: c, cluster: {server: "https://h", certificate-authority-data: "bm90IHBlbQ=="}}]}`,
		"bad server":     `{current-context: x, contexts: [{name: x, context: {cluster: c}}], clusters: [{name: c, cluster: {server: "h:6443"}}]}`,
		"missing CA":     `{current-context: x, contexts: [{name: x, context: {cluster: c}}], clusters: [{name: c, cluster: {server: "https://h", certificate-authority: nope.pem}}]}`,
		"not yaml":       "\t:::",
		"bad proxy":      `{current-context: x, contexts: [{name: x, context: {cluster: c}}], clusters: [{name: c, cluster: {server: "https://h", proxy-url: "::"}}]}`,
		"half a keypair": `{current-context: x, contexts: [{name: x, context: {cluster: c, user: u}}], clusters: [{name: c, cluster: {server: "https://h"}}], users: [{name: u, user: {client-key-data: "eA=="}}]}`,
	} {
		t.Run(name, func(t *testing.T) {
			_, err := LoadKubeconfig(writeFile(t, dir, strings.ReplaceAll(name, " ", "-"), doc), "")
			require.ErrorIs(t, err, ErrConfig)
		})
	}
	_, err := LoadKubeconfig(filepath.Join(dir, "absent"), "")
	require.ErrorIs(t, err, ErrConfig)
	big := writeFile(t, dir, "big", strings.Repeat("#", MaxConfigBytes+1))
	_, err = LoadKubeconfig(big, "")
	require.ErrorIs(t, err, ErrConfig)
	assert.Contains(t, err.Error(), "MaxConfigBytes")
}

func TestInCluster(t *testing.T) {
	nodes, pods := cluster(t)
	f := &fakeAPI{nodes: nodes, pods: pods, token: "sa-token"}
	srv, ca := tlsAPI(t, f, false)
	dir := t.TempDir()
	t.Setenv(envServiceHost, "")
	t.Setenv(envServicePort, "")
	_, err := inCluster(dir)
	require.ErrorIs(t, err, ErrConfig)

	host, port, _ := strings.Cut(strings.TrimPrefix(srv.URL, "https://"), ":")
	t.Setenv(envServiceHost, host)
	t.Setenv(envServicePort, port)
	_, err = inCluster(dir)
	require.ErrorIs(t, err, ErrConfig, "no token file")
	writeFile(t, dir, "token", "sa-token")
	writeFile(t, dir, "ca.crt", "no pem here")
	_, err = inCluster(dir)
	require.ErrorIs(t, err, ErrConfig)
	writeFile(t, dir, "ca.crt", string(ca))
	c, err := inCluster(dir)
	require.NoError(t, err)
	res, err := c.Capture(bg, Options{})
	require.NoError(t, err)
	assert.Len(t, res.Cluster.Nodes, 4)
}
