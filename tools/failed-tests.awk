# failed-tests.awk prints what each failed test wrote, from a `go test -v`
# log. With -v a test's t.Error lines (and a race report) come before its
# "--- FAIL" line, under the last "=== RUN/CONT/NAME" header that named
# it, so lines are kept per test name and printed when that test (or its
# parent, for subtests reported after it) fails.
function flush(name,   k) {
	for (k in buf) if (k == name || index(k, name "/") == 1) { print buf[k]; delete buf[k] }
}
/^=== (RUN|CONT|NAME|PAUSE)/ { cur = $3; line = (cur in buf) ? buf[cur] "\n" $0 : $0; buf[cur] = line; next }
/^[ \t]*--- FAIL: / { flush($3); print; next }
/^[ \t]*--- (PASS|SKIP): / { delete buf[$3]; next }
/^(ok|FAIL)[ \t]/ { if ($1 == "FAIL") print; split("", buf); cur = ""; next }
cur != "" { buf[cur] = buf[cur] "\n" $0 }
