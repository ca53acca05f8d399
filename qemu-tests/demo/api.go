package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"
)

// api is a minimal client for the local cluster's admin endpoint: the demo
// needs three calls, not client-go.
type api struct {
	c    *http.Client
	base string
}

// requestTimeout bounds one API call.
const requestTimeout = 10 * time.Second

func (a api) do(ctx context.Context, method, path string, body, out any) error {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return fmt.Errorf("encoding %s %s body: %w", method, path, err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, a.base+path, rd)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := a.c.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, bytes.TrimSpace(data))
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return fmt.Errorf("decoding %s %s answer: %w", method, path, err)
		}
	}
	return nil
}

type nodeStatus struct {
	Status struct {
		Conditions []struct {
			Type    string `json:"type"`
			Status  string `json:"status"`
			Reason  string `json:"reason"`
			Message string `json:"message"`
		} `json:"conditions"`
		NodeInfo struct {
			KubeletVersion          string `json:"kubeletVersion"`
			ContainerRuntimeVersion string `json:"containerRuntimeVersion"`
			KernelVersion           string `json:"kernelVersion"`
			OSImage                 string `json:"osImage"`
		} `json:"nodeInfo"`
	} `json:"status"`
}

// nodeReady says whether the node is registered and Ready, and what it saw.
func (a api) nodeReady(ctx context.Context) (registered, ready bool, seen string, n nodeStatus) {
	if err := a.do(ctx, "GET", "/api/v1/nodes/"+nodeName, nil, &n); err != nil {
		return false, false, err.Error(), n
	}
	for _, c := range n.Status.Conditions {
		if c.Type == "Ready" {
			return true, c.Status == "True", fmt.Sprintf("Ready=%s %s: %s", c.Status, c.Reason, c.Message), n
		}
	}
	return true, false, "no Ready condition yet", n
}

// podRunning says whether the demo pod runs, and what it saw.
func (a api) podRunning(ctx context.Context) (bool, string) {
	var p struct {
		Status struct {
			Phase             string `json:"phase"`
			ContainerStatuses []struct {
				State map[string]any `json:"state"`
			} `json:"containerStatuses"`
		} `json:"status"`
	}
	if err := a.do(ctx, "GET", "/api/v1/namespaces/"+podNS+"/pods/"+podName, nil, &p); err != nil {
		return false, err.Error()
	}
	seen := "phase " + p.Status.Phase
	for _, c := range p.Status.ContainerStatuses {
		b, _ := json.Marshal(c.State)
		seen += " " + string(b)
	}
	return p.Status.Phase == "Running", seen
}
