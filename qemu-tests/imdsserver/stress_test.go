package imdsserver

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// imdsGet fetches path from the stand-in at url the IMDSv2 way; code 0 is
// no answer.
func imdsGet(client *http.Client, url, path string) (int, string) {
	req, _ := http.NewRequest(http.MethodPut, url+TokenPath, nil)
	req.Header.Set(TTLHeader, "60")
	resp, err := client.Do(req)
	if err != nil {
		return 0, ""
	}
	tok, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return resp.StatusCode, ""
	}
	req, _ = http.NewRequest(http.MethodGet, url+path, nil)
	req.Header.Set(TokenHeader, string(tok))
	resp, err = client.Do(req)
	if err != nil {
		return 0, ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestStartStopParallelStress starts and stops many stand-ins at once, each
// several times: every Start must succeed, its URL must reach that server
// (it answers with its own instance ID) and no other live one, and after
// stop the URL must no longer answer with that ID.
func TestStartStopParallelStress(t *testing.T) {
	const parallel, cycles = 50, 4
	var (
		mu   sync.Mutex
		live = map[string]int{} // host:port → server
	)
	var served atomic.Int32
	// No kept-alive connections: a port freed by one stop is soon another
	// server's, and a pooled connection to the old one would fail the
	// token PUT (not replayable) for a reason that is the client's.
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	var wg sync.WaitGroup
	for i := range parallel {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for c := range cycles {
				n := i*cycles + c
				in := DefaultInstance()
				in.InstanceID = fmt.Sprintf("i-%017x", n)
				s, err := New(Config{Instance: in})
				if err != nil {
					t.Errorf("server %d: New: %v", n, err)
					return
				}
				url, stop, err := s.Start("127.0.0.1:0")
				if err != nil {
					t.Errorf("server %d: Start: %v", n, err)
					return
				}
				hostport := strings.TrimPrefix(url, "http://")
				mu.Lock()
				if other, dup := live[hostport]; dup {
					t.Errorf("servers %d and %d both live on %s", other, n, hostport)
				}
				live[hostport] = n
				mu.Unlock()
				if code, id := imdsGet(client, url, "/latest/meta-data/instance-id"); code != http.StatusOK || id != in.InstanceID {
					t.Errorf("server %d at %s: instance-id %d %q, want %q", n, url, code, id, in.InstanceID)
				} else {
					served.Add(1)
				}
				mu.Lock()
				delete(live, hostport)
				mu.Unlock()
				stop()
				if _, id := imdsGet(client, url, "/latest/meta-data/instance-id"); id == in.InstanceID {
					t.Errorf("server %d still answers at %s after stop", n, url)
				}
			}
		}()
	}
	wg.Wait()
	if got := int(served.Load()); got != parallel*cycles {
		t.Errorf("%d servers answered, want %d", got, parallel*cycles)
	}
	t.Logf("%d stand-ins started, answered and stopped, %d at a time", served.Load(), parallel)
}
