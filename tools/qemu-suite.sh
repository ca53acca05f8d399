#!/usr/bin/env bash
# qemu-suite.sh runs a QEMU test suite for make test-qemu and
# test-qemu-arm64: go test -v into LOG, one console log per VM under
# LOGDIR, the summary lines on stdout and, on a failure, what the failed
# tests wrote. A failure made only of guests whose kernel hung (every
# failed test's output has the harness's ErrGuestStalled; at most 2 such
# tests; qemu-tests/cmd/stalled decides) is run once more, those tests
# alone, and that run's result is the suite's. Both runs are printed and
# kept (LOG.again, LOGDIR/again). Any other failure stands as it is.
#
#   qemu-suite.sh NAME LOG LOGDIR TIMEOUT [RUN]
#
# The caller sets BERTH_IMAGE and BERTH_COMPONENTS_DIR; GO names go.
set -uo pipefail
name=$1 log=$2 logdir=$3 timeout=$4 run=${5:-}
GO=${GO:-go}

summary() {
	grep -E '^(=== RUN|\s*--- (PASS|FAIL|SKIP)|PASS|FAIL|ok |panic|\s+\S+_test\.go:[0-9]+|\s+figure:)' "$1" || true
}
failures() {
	echo "=== what the failed tests wrote (their console tails included), last 300 lines:"
	awk -f tools/failed-tests.awk "$1" | tail -300
}
suite() { # LOG LOGDIR TIMEOUT RUN
	rm -rf "$2"
	mkdir -p "$(dirname "$1")"
	BERTH_QEMU_LOGDIR=$2 $GO test -count=1 -timeout "$3" -v ${4:+-run "$4"} ./qemu-tests >"$1" 2>&1
}

suite "$log" "$logdir" "$timeout" "$run"
rc=$?
summary "$log"
[ "$rc" -eq 0 ] && exit 0
failures "$log"
again=$($GO run ./qemu-tests/cmd/stalled "$log")
if [ -n "$again" ]; then
	# A RUN with a subtest part (test-qemu-arm64's) keeps it.
	sub=""
	case "$run" in */*) sub="/${run#*/}" ;; esac
	echo "$name: every failure was a hung guest kernel; running $again once more (log: $log.again)"
	suite "$log.again" "$logdir/again" 20m "$again$sub"
	rc=$?
	summary "$log.again"
	if [ "$rc" -eq 0 ]; then
		echo "$name: PASSED: $again failed on a hung guest kernel (above) and passed when run again"
		exit 0
	fi
	failures "$log.again"
	log=$log.again
fi
echo "$name: FAILED (exit $rc); full log: $log"
exit "$rc"
