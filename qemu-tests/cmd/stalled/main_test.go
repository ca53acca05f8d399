package main

import (
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/berth-node/berth/qemu-tests/qemu"
)

// hungLine is what the harness writes for a hung guest (Start's cleanup
// after a failure, or the failed wait's own error).
var hungLine = "    qemu.go:290: qemu: " + qemu.ErrGuestStalled.Error() +
	`: the kernel's watchdog said "[  124.530489] watchdog: BUG: soft lockup - CPU#0 stuck for 104s! [berth:292]"`

func TestHungOnly(t *testing.T) {
	pass := "=== RUN   TestSpotInterruption\n    spot_test.go:95: figure: spot notice 4.9 s\n--- PASS: TestSpotInterruption (65.81s)\n"
	hung := func(name string) string {
		return "=== RUN   " + name + "\n    storage_test.go:142: waiting 4m0s for the BERTH-REPORT line: deadline passed\n" +
			hungLine + "\n--- FAIL: " + name + " (240.04s)\n"
	}
	plain := "=== RUN   TestJoin\n    join_test.go:88: node not Ready\n--- FAIL: TestJoin (300.00s)\n"
	tail := "FAIL\nFAIL\tgithub.com/berth-node/berth/qemu-tests\t2440.298s\nFAIL\n"
	for _, tc := range []struct {
		name, log string
		want      []string
		why       string // in the error when want is nil
	}{
		{"CI 2026-11-30: one hung test among passes", pass + hung("TestStorageRAID0AndReboot") + pass + tail,
			[]string{"TestStorageRAID0AndReboot"}, ""},
		{"a subtest's guest hung: its top-level test is run again",
			"=== RUN   TestRootDisk\n=== RUN   TestRootDisk/missing\n" + hungLine + "\n    --- FAIL: TestRootDisk/missing (35.88s)\n--- FAIL: TestRootDisk (70.00s)\n" + tail,
			[]string{"TestRootDisk"}, ""},
		{"two hung", hung("TestA") + hung("TestB") + tail, []string{"TestA", "TestB"}, ""},
		{"three hung is no accident", hung("TestA") + hung("TestB") + hung("TestC") + tail, nil, "3 tests hit a hung guest kernel"},
		{"a plain failure beside a hung one stands", hung("TestA") + plain + tail, nil, "TestJoin failed with no hung guest kernel"},
		{"the marker in a passing test's output does not count",
			"=== RUN   TestA\n" + hungLine + "\n--- PASS: TestA (1.00s)\n" + plain + tail, nil, "TestJoin failed"},
		{"suite timeout", hung("TestA") + "=== RUN   TestB\npanic: test timed out after 55m0s\n" + tail, nil, "the suite panicked"},
		{"build failure", "FAIL\tgithub.com/berth-node/berth/qemu-tests [build failed]\n", nil, "did not build"},
		{"a test that hung after 1430 s (TestRollout's on CI, 2026-12-03) would outlast a rerun's 20 minutes",
			strings.Replace(hung("TestLong"), "(240.04s)", "(1430.47s)", 1) + tail, nil, "TestLong hit a hung guest kernel, but its run took 23m50s, and run again it would not end within the 20m0s"},
		{"TestRollout is never run again, however early it failed", hung("TestRollout") + tail, nil, "TestRollout hit a hung guest kernel, but is never run again"},
		{"nothing failed", pass + "ok  \tgithub.com/berth-node/berth/qemu-tests\t65.9s\n", nil, "no test is reported failed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := hungOnly(strings.NewReader(tc.log), 2, 20*time.Minute, regexp.MustCompile(`^TestRollout$`))
			if tc.want != nil {
				if err != nil || !slices.Equal(got, tc.want) {
					t.Fatalf("got %v, %v; want %v", got, err, tc.want)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.why) {
				t.Fatalf("got %v, %v; want an error containing %q", got, err, tc.why)
			}
		})
	}
}

// The pattern runs exactly the named tests, not others sharing a prefix.
func TestPattern(t *testing.T) {
	re := regexp.MustCompile(pattern([]string{"TestJoin", "TestStorageRAID0AndReboot"}))
	for name, want := range map[string]bool{
		"TestJoin": true, "TestStorageRAID0AndReboot": true,
		"TestJoinFailureSaysWhy": false, "XTestJoin": false,
	} {
		if re.MatchString(name) != want {
			t.Errorf("%s: match = %v, want %v", name, !want, want)
		}
	}
}

func FuzzHungOnly(f *testing.F) {
	f.Add("=== RUN   TestA\n" + hungLine + "\n--- FAIL: TestA (1s)\n")
	f.Add("=== RUN   TestA/b\n--- FAIL: TestA\npanic: x\n")
	f.Fuzz(func(t *testing.T, log string) {
		names, err := hungOnly(strings.NewReader(log), 2, 20*time.Minute, nil)
		if err == nil && (len(names) == 0 || len(names) > 2) {
			t.Fatalf("no error but %d names", len(names))
		}
		if err == nil && !regexp.MustCompile(pattern(names)).MatchString(names[0]) {
			t.Fatalf("pattern %q does not match %q", pattern(names), names[0])
		}
	})
}
