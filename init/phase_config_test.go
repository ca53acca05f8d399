package main

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/berth-node/berth/config/cmdline"
	"github.com/berth-node/berth/config/nocloud"
	"github.com/berth-node/berth/config/sources"
	"github.com/berth-node/berth/config/userdataurl"
	"github.com/berth-node/berth/init/plan"
	"github.com/berth-node/berth/network"
)

// The manifest's accepts decode beside the phases and reach the config
// phase once; an image without them, or with unreadable ones, gives nil
// and (for the unreadable) a warning naming the manifest.
func TestAcceptsDecodedBeside(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	for _, c := range []struct {
		name, raw string
		want      bool
		warn      string
	}{
		{"recorded", `{"kubelet": {"version": "v1.35.4", "flags": {}, "featureGates": {}}}`, true, ""},
		{"older image", ``, false, ""},
		{"unreadable", `{"kubelet": 3}`, false, "accepts are unreadable"},
	} {
		buf.Reset()
		b := &boot{log: log}
		b.decodeAccepts(log, []byte(c.raw))
		a := b.accepts(log)
		if (a != nil) != c.want || (a != nil && a.Kubelet.Version != "v1.35.4") {
			t.Errorf("%s: accepts %+v, want decoded: %v", c.name, a, c.want)
		}
		if b.accepts(log) != nil {
			t.Errorf("%s: a second call gave the accepts again", c.name)
		}
		if c.warn != "" && !strings.Contains(buf.String(), c.warn) || c.warn == "" && buf.Len() != 0 {
			t.Errorf("%s: log %q, want %q", c.name, buf.String(), c.warn)
		}
	}
}

// With berth.userdata= as the source, the config phase reads the URL
// (no IMDS: the report says off), hands its answer to nodeconfig as a
// source named by the key and URL, and records the requests; an empty
// answer stops the boot, naming the URL.
func TestPhaseConfigUserDataURL(t *testing.T) {
	ud, err := os.ReadFile(filepath.Join("..", "config", "nocloud", "testdata", "seed", "static-v2", "user-data"))
	if err != nil {
		t.Fatal(err)
	}
	body := ud
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write(body) }))
	defer srv.Close()
	loc, err := userdataurl.Parse(srv.URL + "/node-1")
	if err != nil {
		t.Fatal(err)
	}
	b, buf := testBoot()
	b.cl = &cmdline.Cmdline{}
	b.node.source = &sources.Decision{Use: sources.URL, URL: loc}
	if err := phaseConfig(context.Background(), b, b.log); err != nil {
		t.Fatalf("phaseConfig: %v\n%s", err, buf.String())
	}
	rep := b.rep.Config
	name := "berth.userdata=" + srv.URL + "/node-1"
	if rep.IMDS != "off" || rep.UserDataURL != loc.Where || len(rep.UserDataURLCalls) != 1 || rep.UserDataURLCalls[0].Status != 200 ||
		!slices.Contains(rep.Sources, name) {
		t.Errorf("report %+v: want IMDS off, the URL, one 200 and the source %q", rep, name)
	}
	if b.node.config == nil || b.node.config.Config.Spec.Cluster.Name != "my-cluster" {
		t.Errorf("config %+v: want the URL's NodeConfig", b.node.config)
	}
	if !strings.Contains(buf.String(), "lifecycle notices not watched: user data comes from userdata-url") {
		t.Errorf("console:\n%s", buf.String())
	}

	body = []byte("\n")
	b, _ = testBoot()
	b.cl = &cmdline.Cmdline{}
	b.node.source = &sources.Decision{Use: sources.URL, URL: loc}
	if err := phaseConfig(context.Background(), b, b.log); err == nil || !strings.Contains(err.Error(), name+": empty") {
		t.Errorf("empty answer: %v, want an error naming the URL", err)
	}
}

// Off EC2 the plan's machine facts come from the source: a seed's
// meta-data, or only where user data came from; the node IP is the
// network's first IPv4 address.
func TestOffEC2Machine(t *testing.T) {
	seed := &nocloud.Inspection{Seed: nocloud.Seed{MetaData: nocloud.MetaData{InstanceID: "iid-1", LocalHostname: "lab-1"}}}
	for _, c := range []struct {
		d    sources.Decision
		want plan.Machine
	}{
		{sources.Decision{Use: sources.Seed, Seed: sources.Volume{Device: "/dev/vdb"}}, plan.Machine{Source: "NoCloud seed /dev/vdb", InstanceID: "iid-1", Hostname: "lab-1"}},
		{sources.Decision{Use: sources.URL, URL: userdataurl.Location{Kind: userdataurl.HTTP, Where: "http://x/u"}}, plan.Machine{Source: "berth.userdata=http://x/u"}},
		{sources.Decision{Use: sources.Image}, plan.Machine{Source: "the image"}},
	} {
		if got := offEC2Machine(&c.d, seed); *got != c.want {
			t.Errorf("%s: %+v, want %+v", c.d.Use, *got, c.want)
		}
	}
	if ip := firstIPv4(&network.Result{Addresses: []string{"fd00::5/128", "192.0.2.10/24"}}); ip != "192.0.2.10" {
		t.Errorf("firstIPv4 = %q", ip)
	}
	if ip := firstIPv4(nil); ip != "" {
		t.Errorf("firstIPv4(nil) = %q", ip)
	}
}
