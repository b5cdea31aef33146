package capture

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/gputopo/gputopo/gang"
	"github.com/gputopo/gputopo/topology"
)

// Limits of a capture.
const (
	// MaxResponseBytes bounds the bytes read from the API server in one
	// capture, all pages of nodes and pods together (256 MiB).
	MaxResponseBytes = 256 << 20
	// MaxConfigBytes bounds a kubeconfig, token or CA file (4 MiB).
	MaxConfigBytes = 4 << 20
	// NodePageSize is the number of nodes asked for per list request
	// (nodes carry topology annotations of up to
	// kube.MaxAnnotationBytes, so pages are kept small).
	NodePageSize = 100
	// PodPageSize is the number of pods asked for per list request.
	PodPageSize = 500
	// DefaultTimeout bounds a capture when the context has no deadline.
	DefaultTimeout = 2 * time.Minute
)

// Sentinel errors.
var (
	// ErrConfig: the kubeconfig or in-cluster configuration is missing,
	// malformed or asks for something this package does not support (exec
	// credential plugins, auth providers).
	ErrConfig = errors.New("capture: bad client configuration")
	// ErrAPI: the API server answered a request with an error status or a
	// body that does not decode.
	ErrAPI = errors.New("capture: API request failed")
)

// In-cluster service account files and variables.
const (
	serviceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount"
	envServiceHost    = "KUBERNETES_SERVICE_HOST"
	envServicePort    = "KUBERNETES_SERVICE_PORT"
)

// Client lists nodes and pods from one API server.
type Client struct {
	server *url.URL
	token  string
	http   *http.Client
	// budget is the response bytes left (MaxResponseBytes unless a test
	// lowers it).
	budget int64
}

// NewClient returns a client for server ("https://host:port") that sends
// token as a bearer token when it is not empty. hc nil means
// http.DefaultClient.
func NewClient(server, token string, hc *http.Client) (*Client, error) {
	u, err := url.Parse(server)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return nil, fmt.Errorf("%w: server %q is not an http(s) URL", ErrConfig, server)
	}
	if hc == nil {
		hc = http.DefaultClient
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	return &Client{server: u, token: token, http: hc, budget: MaxResponseBytes}, nil
}

// kubeconfig is the part of a kubeconfig file this package reads.
type kubeconfig struct {
	CurrentContext string `json:"current-context"`
	Clusters       []struct {
		Name    string `json:"name"`
		Cluster struct {
			Server                   string `json:"server"`
			CertificateAuthority     string `json:"certificate-authority"`
			CertificateAuthorityData []byte `json:"certificate-authority-data"`
			InsecureSkipTLSVerify    bool   `json:"insecure-skip-tls-verify"`
			TLSServerName            string `json:"tls-server-name"`
			ProxyURL                 string `json:"proxy-url"`
		} `json:"cluster"`
	} `json:"clusters"`
	Contexts []struct {
		Name    string `json:"name"`
		Context struct {
			Cluster  string `json:"cluster"`
			AuthInfo string `json:"user"`
		} `json:"context"`
	} `json:"contexts"`
	Users []struct {
		Name string `json:"name"`
		User struct {
			ClientCertificate     string          `json:"client-certificate"`
			ClientCertificateData []byte          `json:"client-certificate-data"`
			ClientKey             string          `json:"client-key"`
			ClientKeyData         []byte          `json:"client-key-data"`
			Token                 string          `json:"token"`
			TokenFile             string          `json:"tokenFile"`
			Username              string          `json:"username"`
			Exec                  json.RawMessage `json:"exec"`
			AuthProvider          json.RawMessage `json:"auth-provider"`
		} `json:"user"`
	} `json:"users"`
}

// readFile reads a configuration file within MaxConfigBytes.
func readFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxConfigBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrConfig, path, err)
	}
	if len(b) > MaxConfigBytes {
		return nil, fmt.Errorf("%w: %w: %s is larger than MaxConfigBytes (%d)", ErrConfig, topology.ErrLimit, path, MaxConfigBytes)
	}
	return b, nil
}

// LoadKubeconfig returns a client for a context of the kubeconfig file at
// path (contextName "" means its current-context). It supports the
// server, certificate-authority(-data), insecure-skip-tls-verify,
// tls-server-name and proxy-url of the cluster, and client certificates,
// token and tokenFile of the user; relative file names are taken from the
// kubeconfig's directory. Exec plugins and auth providers are errors
// wrapping ErrConfig.
func LoadKubeconfig(path, contextName string) (*Client, error) {
	data, err := readFile(path)
	if err != nil {
		return nil, err
	}
	var kc kubeconfig
	if err := yaml.Unmarshal(data, &kc); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrConfig, path, err)
	}
	if contextName == "" {
		contextName = kc.CurrentContext
	}
	if contextName == "" {
		return nil, fmt.Errorf("%w: %s has no current-context (name one with --context)", ErrConfig, path)
	}
	dir := filepath.Dir(path)
	abs := func(p string) string {
		if p == "" || filepath.IsAbs(p) {
			return p
		}
		return filepath.Join(dir, p)
	}
	ci := -1
	for i, c := range kc.Contexts {
		if c.Name == contextName {
			ci = i
		}
	}
	if ci < 0 {
		return nil, fmt.Errorf("%w: %s has no context %q", ErrConfig, path, contextName)
	}
	ctx := kc.Contexts[ci].Context
	cl := -1
	for i, c := range kc.Clusters {
		if c.Name == ctx.Cluster {
			cl = i
		}
	}
	if cl < 0 {
		return nil, fmt.Errorf("%w: context %q names cluster %q, which %s lacks", ErrConfig, contextName, ctx.Cluster, path)
	}
	cluster := kc.Clusters[cl].Cluster
	tc := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: cluster.TLSServerName, InsecureSkipVerify: cluster.InsecureSkipTLSVerify} //nolint:gosec // the kubeconfig asks for it
	caPEM := cluster.CertificateAuthorityData
	if len(caPEM) == 0 && cluster.CertificateAuthority != "" {
		if caPEM, err = readFile(abs(cluster.CertificateAuthority)); err != nil {
			return nil, err
		}
	}
	if len(caPEM) > 0 {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(caPEM) {
			return nil, fmt.Errorf("%w: cluster %q: no PEM certificate in its certificate authority", ErrConfig, ctx.Cluster)
		}
		tc.RootCAs = pool
	}
	token := ""
	if ctx.AuthInfo != "" {
		ui := -1
		for i, u := range kc.Users {
			if u.Name == ctx.AuthInfo {
				ui = i
			}
		}
		if ui < 0 {
			return nil, fmt.Errorf("%w: context %q names user %q, which %s lacks", ErrConfig, contextName, ctx.AuthInfo, path)
		}
		u := kc.Users[ui].User
		if len(u.Exec) > 0 && string(u.Exec) != "null" || len(u.AuthProvider) > 0 && string(u.AuthProvider) != "null" {
			return nil, fmt.Errorf("%w: user %q uses an exec plugin or auth provider, which gputopo capture does not run; use a token or client certificate (e.g. a service account token)", ErrConfig, ctx.AuthInfo)
		}
		token = u.Token
		if token == "" && u.TokenFile != "" {
			b, err := readFile(abs(u.TokenFile))
			if err != nil {
				return nil, err
			}
			token = strings.TrimSpace(string(b))
		}
		certPEM, keyPEM := u.ClientCertificateData, u.ClientKeyData
		if len(certPEM) == 0 && u.ClientCertificate != "" {
			if certPEM, err = readFile(abs(u.ClientCertificate)); err != nil {
				return nil, err
			}
		}
		if len(keyPEM) == 0 && u.ClientKey != "" {
			if keyPEM, err = readFile(abs(u.ClientKey)); err != nil {
				return nil, err
			}
		}
		if len(certPEM) > 0 || len(keyPEM) > 0 {
			cert, err := tls.X509KeyPair(certPEM, keyPEM)
			if err != nil {
				return nil, fmt.Errorf("%w: user %q: client certificate: %w", ErrConfig, ctx.AuthInfo, err)
			}
			tc.Certificates = []tls.Certificate{cert}
		}
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = tc
	if cluster.ProxyURL != "" {
		pu, err := url.Parse(cluster.ProxyURL)
		if err != nil {
			return nil, fmt.Errorf("%w: cluster %q: proxy-url: %w", ErrConfig, ctx.Cluster, err)
		}
		tr.Proxy = http.ProxyURL(pu)
	}
	return NewClient(cluster.Server, token, &http.Client{Transport: tr})
}

// InCluster returns a client for the API server of the cluster the
// program runs in, as the pod's service account: the
// KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT variables and the
// token and ca.crt under /var/run/secrets/kubernetes.io/serviceaccount.
func InCluster() (*Client, error) { return inCluster(serviceAccountDir) }

func inCluster(dir string) (*Client, error) {
	host, port := os.Getenv(envServiceHost), os.Getenv(envServicePort)
	if host == "" || port == "" {
		return nil, fmt.Errorf("%w: not running in a cluster (%s or %s is not set)", ErrConfig, envServiceHost, envServicePort)
	}
	token, err := readFile(filepath.Join(dir, "token"))
	if err != nil {
		return nil, err
	}
	ca, err := readFile(filepath.Join(dir, "ca.crt"))
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return nil, fmt.Errorf("%w: %s/ca.crt holds no PEM certificate", ErrConfig, dir)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: pool}
	return NewClient("https://"+net.JoinHostPort(host, port), strings.TrimSpace(string(token)), &http.Client{Transport: tr})
}

// status is the part of a metav1.Status error body this package reads.
type status struct {
	Message string `json:"message"`
	Reason  string `json:"reason"`
}

// listMeta is the part of a list's metadata this package reads.
type listMeta struct {
	Continue string `json:"continue"`
}

// get reads one response body within the client's remaining budget and
// decodes it into v.
func (c *Client) get(ctx context.Context, path string, query url.Values, v any) error {
	u := *c.server
	u.Path += path
	u.RawQuery = query.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrAPI, err)
	}
	req.Header.Set("Accept", "application/json")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("%w: GET %s: %w", ErrAPI, path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, c.budget+1))
	if err != nil {
		return fmt.Errorf("%w: GET %s: %w", ErrAPI, path, err)
	}
	if int64(len(body)) > c.budget {
		return fmt.Errorf("%w: GET %s: the API server's answers take more than MaxResponseBytes (%d) in all", topology.ErrLimit, path, MaxResponseBytes)
	}
	c.budget -= int64(len(body))
	if resp.StatusCode != http.StatusOK {
		var st status
		msg := strings.TrimSpace(string(body))
		if json.Unmarshal(body, &st) == nil && st.Message != "" {
			msg = st.Message
		}
		if len(msg) > 300 {
			msg = msg[:300] + "..."
		}
		return fmt.Errorf("%w: GET %s: %s: %s", ErrAPI, path, resp.Status, msg)
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("%w: GET %s: %w", ErrAPI, path, err)
	}
	return nil
}

// listNodes lists every node, NodePageSize at a time, at most gang.MaxNodes.
func (c *Client) listNodes(ctx context.Context) ([]v1.Node, error) {
	var out []v1.Node
	q := url.Values{"limit": {fmt.Sprint(NodePageSize)}}
	for {
		var page struct {
			Metadata listMeta  `json:"metadata"`
			Items    []v1.Node `json:"items"`
		}
		if err := c.get(ctx, "/api/v1/nodes", q, &page); err != nil {
			return nil, err
		}
		if len(out)+len(page.Items) > gang.MaxNodes {
			return nil, fmt.Errorf("%w: the cluster has more than gang.MaxNodes (%d) nodes", topology.ErrLimit, gang.MaxNodes)
		}
		for i := range page.Items {
			out = append(out, slim(page.Items[i]))
		}
		if page.Metadata.Continue == "" {
			return out, nil
		}
		q.Set("continue", page.Metadata.Continue)
	}
}

// listPods lists the bound pods that have not finished (in namespace, ""
// for all), PodPageSize at a time, at most gang.MaxAllocations.
func (c *Client) listPods(ctx context.Context, namespace string) ([]v1.Pod, error) {
	var out []v1.Pod
	path := "/api/v1/pods"
	if namespace != "" {
		path = "/api/v1/namespaces/" + url.PathEscape(namespace) + "/pods"
	}
	q := url.Values{
		"limit":         {fmt.Sprint(PodPageSize)},
		"fieldSelector": {"spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed"},
	}
	for {
		var page struct {
			Metadata listMeta `json:"metadata"`
			Items    []v1.Pod `json:"items"`
		}
		if err := c.get(ctx, path, q, &page); err != nil {
			return nil, err
		}
		if len(out)+len(page.Items) > gang.MaxAllocations {
			return nil, fmt.Errorf("%w: the cluster runs more than gang.MaxAllocations (%d) pods", topology.ErrLimit, gang.MaxAllocations)
		}
		for i := range page.Items {
			out = append(out, slimPod(page.Items[i]))
		}
		if page.Metadata.Continue == "" {
			return out, nil
		}
		q.Set("continue", page.Metadata.Continue)
	}
}

// Capture lists the cluster's nodes and bound pods (of namespace, "" for
// all; nodes are always all) and builds the cluster file with [Build].
// Without a deadline on ctx it uses DefaultTimeout.
func (c *Client) Capture(ctx context.Context, opts Options) (*Result, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultTimeout)
		defer cancel()
	}
	nodes, err := c.listNodes(ctx)
	if err != nil {
		return nil, err
	}
	pods, err := c.listPods(ctx, opts.Namespace)
	if err != nil {
		return nil, err
	}
	return Build(nodes, pods, opts)
}
