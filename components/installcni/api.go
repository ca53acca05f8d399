package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// maxNodeBytes bounds what is read of a node object: a real one is a few
// kilobytes; anything near this is not a node.
const maxNodeBytes = 4 << 20

// apiClient GETs the installer's node from the API server with the pod's
// service account, by plain HTTPS: client-go would make the image several
// times larger for one GET.
type apiClient struct {
	base      string
	tokenFile string
	http      *http.Client
}

// newAPIClient reads the service account's CA from saDir. host and port are
// KUBERNETES_SERVICE_HOST and _PORT: the DaemonSet sets them to the API
// server's own address, as the installer runs before kube-proxy makes the
// kubernetes Service reachable.
func newAPIClient(host, port, saDir string) (*apiClient, error) {
	if host == "" || port == "" {
		return nil, fmt.Errorf("KUBERNETES_SERVICE_HOST=%q and KUBERNETES_SERVICE_PORT=%q: both must be set (the API server's address)", host, port)
	}
	caFile := filepath.Join(saDir, "ca.crt")
	ca, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("reading the API server's CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return nil, fmt.Errorf("reading the API server's CA: %s holds no PEM certificate", caFile)
	}
	return &apiClient{
		base:      "https://" + net.JoinHostPort(host, port),
		tokenFile: filepath.Join(saDir, "token"),
		http: &http.Client{
			Timeout: 10 * time.Second,
			Transport: &http.Transport{
				TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
			},
		},
	}, nil
}

// node returns the JSON of node name.
func (c *apiClient) node(ctx context.Context, name string) ([]byte, error) {
	// Read on every call: kubelet rotates the projected token.
	token, err := os.ReadFile(c.tokenFile)
	if err != nil {
		return nil, fmt.Errorf("reading the service account token: %w", err)
	}
	u := c.base + "/api/v1/nodes/" + url.PathEscape(name)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", u, err)
	}
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
	req.Header.Set("Accept", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", u, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxNodeBytes))
	if err != nil {
		return nil, fmt.Errorf("GET %s: reading the body: %w", u, err)
	}
	if resp.StatusCode != http.StatusOK {
		msg := strings.TrimSpace(string(body))
		if len(msg) > 300 {
			msg = msg[:300] + "..."
		}
		return nil, fmt.Errorf("GET %s: %s: %s", u, resp.Status, msg)
	}
	return body, nil
}
