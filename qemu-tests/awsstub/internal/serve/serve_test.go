package serve

import (
	"io"
	"net/http"
	"testing"
)

func TestStartServesAndStops(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok") })
	u, stop, err := Start("test", "127.0.0.1:0", h, nil, Discard(nil))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(u + "/")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "ok" {
		t.Fatalf("body %q", b)
	}
	stop()
	stop() // idempotent
	if _, err := http.Get(u + "/"); err == nil {
		t.Fatal("still serving after stop")
	}
}

func TestLogIsBounded(t *testing.T) {
	var l Log
	for i := 0; i < 10005; i++ {
		l.Add(Request{Status: i})
	}
	all := l.All()
	if len(all) != 10000 || all[0].Status != 5 || all[len(all)-1].Status != 10004 {
		t.Fatalf("len %d first %d last %d", len(all), all[0].Status, all[len(all)-1].Status)
	}
}
