package controlplane

// Kubelet serving certificates. berth's kubelet config has
// serverTLSBootstrap: true, as EKS's has: kubelet serves on 10250 only once
// a kubernetes.io/kubelet-serving CSR of its own is approved, and
// kube-controller-manager approves only client CSRs. EKS approves serving
// CSRs itself; the test control plane does the same here, for node
// requesters asking for what a kubelet serving certificate is, so
// `kubectl logs` and `exec` reach the kubelet.

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"
)

const (
	kubeletServingSigner = "kubernetes.io/kubelet-serving"
	csrPath              = "/apis/certificates.k8s.io/v1/certificatesigningrequests"
	// approveInterval is how often the approver looks for pending CSRs.
	approveInterval = 2 * time.Second
)

// csr is the part of a certificates.k8s.io/v1 CertificateSigningRequest the
// approver reads; the object itself is sent back whole (raw).
type csr struct {
	Metadata struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec struct {
		Request    []byte   `json:"request"`
		SignerName string   `json:"signerName"`
		Username   string   `json:"username"`
		Groups     []string `json:"groups"`
		Usages     []string `json:"usages"`
	} `json:"spec"`
	Status struct {
		Conditions []struct {
			Type string `json:"type"`
		} `json:"conditions"`
	} `json:"status"`
}

// servingVerdict decides whether a kubelet-serving CSR is approved: the
// requester is a node (system:node:NAME in system:nodes), the request's
// subject is that node, and it asks only for serving usages and DNS or IP
// names. done is true for a CSR already approved or denied, or of another
// signer: nothing to do.
func servingVerdict(c csr) (approve, done bool, why string) {
	if c.Spec.SignerName != kubeletServingSigner {
		return false, true, "signer " + c.Spec.SignerName
	}
	for _, cond := range c.Status.Conditions {
		if cond.Type == "Approved" || cond.Type == "Denied" || cond.Type == "Failed" {
			return false, true, "already " + cond.Type
		}
	}
	node, ok := strings.CutPrefix(c.Spec.Username, "system:node:")
	if !ok || node == "" || !slices.Contains(c.Spec.Groups, "system:nodes") {
		return false, false, fmt.Sprintf("requester %q (groups %v) is not a node", c.Spec.Username, c.Spec.Groups)
	}
	for _, u := range c.Spec.Usages {
		if u != "digital signature" && u != "key encipherment" && u != "server auth" {
			return false, false, fmt.Sprintf("usage %q is not a serving usage", u)
		}
	}
	if !slices.Contains(c.Spec.Usages, "server auth") {
		return false, false, "no server auth usage"
	}
	blk, _ := pem.Decode(c.Spec.Request)
	if blk == nil || blk.Type != "CERTIFICATE REQUEST" {
		return false, false, "spec.request is not a PEM CERTIFICATE REQUEST"
	}
	req, err := x509.ParseCertificateRequest(blk.Bytes)
	if err != nil {
		return false, false, fmt.Sprintf("parsing spec.request: %v", err)
	}
	if req.Subject.CommonName != c.Spec.Username || !slices.Equal(req.Subject.Organization, []string{"system:nodes"}) {
		return false, false, fmt.Sprintf("subject CN=%q O=%v is not the requester's", req.Subject.CommonName, req.Subject.Organization)
	}
	if len(req.EmailAddresses) > 0 || len(req.URIs) > 0 {
		return false, false, "asks for e-mail or URI names"
	}
	if len(req.DNSNames) == 0 && len(req.IPAddresses) == 0 {
		return false, false, "asks for no DNS or IP name"
	}
	return true, false, "node " + node + " serving " + strings.Join(append(slices.Clone(req.DNSNames), ipStrings(req)...), ",")
}

func ipStrings(req *x509.CertificateRequest) []string {
	out := make([]string, len(req.IPAddresses))
	for i, ip := range req.IPAddresses {
		out[i] = ip.String()
	}
	return out
}

// approveServingCSRs approves node serving CSRs every approveInterval
// until ctx ends. Each CSR is judged once; refusals are logged.
func (c *Cluster) approveServingCSRs(ctx context.Context) {
	seen := map[string]bool{}
	t := time.NewTicker(approveInterval)
	defer t.Stop()
	for {
		if err := c.approveOnce(ctx, seen); err != nil && ctx.Err() == nil {
			c.log.Warn("serving CSR approver", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (c *Cluster) approveOnce(ctx context.Context, seen map[string]bool) error {
	host := c.hostEndpoint()
	url := host + csrPath + "?fieldSelector=spec.signerName%3D" + strings.ReplaceAll(kubeletServingSigner, "/", "%2F")
	var list struct {
		Items []json.RawMessage `json:"items"`
	}
	if err := c.getJSON(ctx, url, &list); err != nil {
		return fmt.Errorf("listing CSRs: %w", err)
	}
	for _, raw := range list.Items {
		var one csr
		if err := json.Unmarshal(raw, &one); err != nil {
			return fmt.Errorf("decoding a CSR: %w", err)
		}
		name := one.Metadata.Name
		if seen[name] {
			continue
		}
		approve, done, why := servingVerdict(one)
		if done {
			seen[name] = true
			continue
		}
		if !approve {
			seen[name] = true
			c.log.Warn("serving CSR left pending", "csr", name, "why", why)
			continue
		}
		if err := c.approve(ctx, host, name, raw, why); err != nil {
			return err
		}
		seen[name] = true
		c.log.Info("serving CSR approved", "csr", name, "what", why)
	}
	return nil
}

// approve adds the Approved condition through the approval subresource.
func (c *Cluster) approve(ctx context.Context, host, name string, raw json.RawMessage, why string) error {
	var obj map[string]any
	if err := json.Unmarshal(raw, &obj); err != nil {
		return fmt.Errorf("decoding CSR %s: %w", name, err)
	}
	status, _ := obj["status"].(map[string]any)
	if status == nil {
		status = map[string]any{}
	}
	conds, _ := status["conditions"].([]any)
	status["conditions"] = append(conds, map[string]any{
		"type": "Approved", "status": "True", "reason": "BerthTestApprove",
		"message": "berth test control plane: " + why,
	})
	obj["status"] = status
	b, err := json.Marshal(obj)
	if err != nil {
		return fmt.Errorf("encoding CSR %s: %w", name, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, host+csrPath+"/"+name+"/approval", bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.client.Do(req)
	if err != nil {
		return fmt.Errorf("approving CSR %s: %w", name, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		rb, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		return fmt.Errorf("approving CSR %s: %s: %.300s", name, resp.Status, rb)
	}
	return nil
}
