#!/usr/bin/env bash
# qemu-suite.sh runs a QEMU test suite for make test-qemu and
# test-qemu-arm64: go test -v into LOG, one console log per VM under
# LOGDIR, the summary lines on stdout and, on a failure, what the failed
# tests wrote, ending with why each failed (qemu-tests/cmd/failwhy: its
# error messages alone, since CI shows the end of the output). A failure made only of guests whose kernel hung (every
# failed test's output has the harness's ErrGuestStalled; at most 2 such
# tests; qemu-tests/cmd/stalled decides) is run once more, those tests
# alone, and that run's result is the suite's. Both runs are printed and
# kept (LOG.again, LOGDIR/again). Any other failure stands as it is, and
# so does a hung test whose run took longer than the rerun's 20 minutes,
# or that $NO_RERUN (a -run pattern of top-level tests) names: a test that
# resets its hung guests itself and is too long to run twice in CI's
# time (TestRollout).
#
# LAST (a -run pattern of top-level tests) runs after all the others, in
# a second go test of its own appended to LOG, with what is left of
# TIMEOUT: make test's builds at nice 19 beside the amd64 suite are done
# by then. The tests with two or three guests and a control plane on two
# cores are the ones that suffer most from a build beside it, nice or
# not: TestCluster ran 40 % slower in a cold run beside the arm64 and e2e
# builds.
#
# SKIP (a -skip pattern of top-level tests) is left out of both: a test
# with a target of its own (make test-cluster's TestCluster).
#
#   qemu-suite.sh NAME LOG LOGDIR TIMEOUT [RUN [LAST [SKIP]]]
#
# TIMEOUT is go test's -timeout (for example 55m), bounding both runs
# together. The caller sets BERTH_IMAGE and BERTH_COMPONENTS_DIR; GO
# names go.
set -uo pipefail
name=$1 log=$2 logdir=$3 timeout=$4 run=${5:-} last=${6:-} skip=${7:-}
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
	BERTH_QEMU_LOGDIR=$2 $GO test -count=1 -timeout "$3" -v ${4:+-run "$4"} ${skip:+-skip "$skip"} ./qemu-tests >"$1" 2>&1
}

# seconds TIMEOUT: go's duration (a number with h, m or s) in seconds.
seconds() {
	case "$1" in
	*h) echo $((${1%h} * 3600)) ;;
	*m) echo $((${1%m} * 60)) ;;
	*s) echo "${1%s}" ;;
	*) echo "qemu-suite.sh: TIMEOUT $1: want a number with h, m or s" >&2; exit 2 ;;
	esac
}

# The rest is one block, which bash reads whole before it runs any of
# it: a run lasts an hour, and an edit to this file meanwhile must not
# change what the running one does (bash reads a script as it goes).
{
if [ -z "$last" ]; then
	suite "$log" "$logdir" "$timeout" "$run"
	rc=$?
else
	budget=$(seconds "$timeout") || exit 2
	start=$SECONDS
	rm -rf "$logdir"
	mkdir -p "$(dirname "$log")" "$logdir"
	BERTH_QEMU_LOGDIR=$logdir $GO test -count=1 -timeout "${budget}s" -v ${run:+-run "$run"} -skip "$last${skip:+|$skip}" ./qemu-tests >"$log" 2>&1
	rc=$?
	left=$((budget - (SECONDS - start)))
	if grep -q '^panic: ' "$log"; then
		echo "$name: the first run panicked; $last not run" | tee -a "$log"
	elif [ "$left" -lt 60 ]; then
		echo "$name: ${left}s of the ${timeout} left; $last not run" | tee -a "$log"
		rc=1
	else
		echo "$name: $last, last, with ${left}s of the ${timeout} left" | tee -a "$log"
		BERTH_QEMU_LOGDIR=$logdir $GO test -count=1 -timeout "${left}s" -v -run "$last" ${skip:+-skip "$skip"} ./qemu-tests >>"$log" 2>&1
		rc2=$?
		[ "$rc" -eq 0 ] && rc=$rc2
	fi
fi
summary "$log"
[ "$rc" -eq 0 ] && exit 0
failures "$log"
again_timeout=20m
again=$($GO run ./qemu-tests/cmd/stalled -fit "$again_timeout" ${NO_RERUN:+-never "$NO_RERUN"} "$log")
if [ -n "$again" ]; then
	# A RUN with a subtest part (test-qemu-arm64's) keeps it.
	sub=""
	case "$run" in */*) sub="/${run#*/}" ;; esac
	echo "$name: every failure was a hung guest kernel; running $again once more (log: $log.again)"
	suite "$log.again" "$logdir/again" "$again_timeout" "$again$sub"
	rc=$?
	summary "$log.again"
	if [ "$rc" -eq 0 ]; then
		echo "$name: PASSED: $again failed on a hung guest kernel (above) and passed when run again"
		exit 0
	fi
	failures "$log.again"
	log=$log.again
fi
# Last, as CI shows the end of what make test printed: each failed test's
# t.Error and t.Fatal messages, a few lines each.
$GO run ./qemu-tests/cmd/failwhy "$log" | head -60
echo "$name: FAILED (exit $rc); full log: $log"
exit "$rc"
}
