package qemutests

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/berth-node/berth/network/timesync/ntptest"

	"github.com/berth-node/berth/qemu-tests/qemu"
)

// hostNTP serves the host's time over NTP (stratum 1) on 127.0.0.1, which
// the guest reaches as 10.0.2.2 through QEMU's user network. It returns
// the port.
func hostNTP(t *testing.T) int {
	t.Helper()
	s, err := ntptest.Start("127.0.0.1:0", 0, 1)
	if err != nil {
		t.Fatalf("listening for NTP: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s.Port()
}

// TestTimeSyncStepsWrongRTC boots a guest whose RTC is 3 hours behind,
// with berth.ntp pointing at an NTP server on the host: berth's time phase
// must step the clock by the 3 hours, say so in the report's time section,
// leave the kernel's clock marked synchronized, and the guest's date must
// then match the host's.
func TestTimeSyncStepsWrongRTC(t *testing.T) {
	port := hostNTP(t)
	const behind = 3 * time.Hour
	cfg := qemu.ImageConfig(qemu.ImageDir(t), fmt.Sprintf("berth.ntp=10.0.2.2:%d", port))
	cfg.Shell = true
	cfg.Timeout = vmTimeout
	cfg.NICs = []qemu.NIC{{}}
	cfg.Extra = append(cfg.Extra, "-rtc", "base="+time.Now().UTC().Add(-behind).Format("2006-01-02T15:04:05"))
	vm := qemu.Start(t, cfg)
	if _, err := vm.Report(bootTimeout); err != nil {
		t.Fatal(err)
	}

	// The step may land after the report is printed (boot does not wait
	// for it when no service is planned); boot.json follows each sync.
	var ts map[string]any
	deadline := time.Now().Add(time.Minute)
	for {
		out, err := vm.Shell("cat /run/berth/boot.json", shellTimeout)
		if err != nil {
			t.Fatal(err)
		}
		var rep map[string]any
		if err := json.Unmarshal([]byte(strings.TrimSpace(out)), &rep); err != nil {
			t.Fatalf("boot.json: %v\n%s", err, out)
		}
		ts, _ = rep["time"].(map[string]any)
		if ts != nil && ts["stepped"] == true {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no step within a minute of the report; time section: %v\nconsole:\n%s", ts, vm.ConsoleTail(40))
		}
		time.Sleep(2 * time.Second)
	}
	wantServer := fmt.Sprintf("10.0.2.2:%d", port)
	if ts["server"] != wantServer || ts["synced"] != true || ts["stratum"] != float64(1) {
		t.Errorf("time section %v: want server %s, synced, stratum 1", ts, wantServer)
	}
	off, _ := ts["firstOffsetMs"].(float64)
	if d := time.Duration(off * float64(time.Millisecond)); (d - behind).Abs() > 3*time.Second {
		t.Errorf("first offset %.0f ms, want %s ± 3 s", off, behind)
	}
	if step, _ := ts["stepMs"].(float64); step != off {
		t.Errorf("stepMs %v, want the first offset %v", step, off)
	}

	before := time.Now()
	out, err := vm.Shell("date +%s", shellTimeout)
	after := time.Now()
	if err != nil {
		t.Fatal(err)
	}
	guest, err := strconv.ParseInt(strings.TrimSpace(out), 10, 64)
	if err != nil {
		t.Fatalf("date +%%s: %q", out)
	}
	if guest < before.Unix()-2 || guest > after.Unix()+2 {
		t.Errorf("guest date %d, host %d..%d: want within 2 s after the step", guest, before.Unix(), after.Unix())
	}

	// busybox's adjtimex reads the kernel's NTP state: STA_UNSYNC (0x40)
	// must be clear.
	out, err = vm.Shell("adjtimex || busybox adjtimex", shellTimeout)
	if err != nil {
		t.Fatal(err)
	}
	status := -1
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "status:" {
			status, _ = strconv.Atoi(f[1])
		}
	}
	if status < 0 {
		t.Errorf("no status line from adjtimex:\n%s", out)
	} else if status&0x40 != 0 || status&0x1 == 0 {
		t.Errorf("kernel clock status %#x: want STA_PLL set and STA_UNSYNC clear\n%s", status, out)
	}

	if ms, ok := ts["firstSyncMs"].(float64); ok {
		figure(t, "kernel start to first NTP sync (stepped %.0f ms): %.0f ms guest boot clock", off, ms)
	} else {
		t.Errorf("time section lacks firstSyncMs: %v", ts)
	}
}
