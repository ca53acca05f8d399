#!/usr/bin/env bash
# busy.sh N COMMAND...: runs COMMAND with N CPU hogs beside it at normal
# priority, and stops them when COMMAND ends however it ends. `make
# test-qemu-busy` uses it to check that the QEMU suite holds on a loaded
# host, as CI's 2-core machine is; it is not part of make test.
set -euo pipefail
n=${1:?usage: busy.sh N COMMAND...}
shift
[[ $n =~ ^[0-9]+$ ]] || { echo "busy.sh: N=$n: want a number of hogs" >&2; exit 2; }
pids=()
stop() { [ ${#pids[@]} -eq 0 ] || kill "${pids[@]}" 2>/dev/null || true; }
trap stop EXIT
# One block, read whole before it runs: COMMAND may run for hours, and
# an edit to this file meanwhile must not change what this run does.
{
for ((i = 0; i < n; i++)); do
  yes >/dev/null &
  pids+=($!)
done
echo "busy.sh: $n CPU hog(s) beside: $*"
set +e
"$@"
rc=$?
set -e
echo "busy.sh: $* exited $rc with $n hog(s) beside it"
exit $rc
}
