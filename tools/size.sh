#!/usr/bin/env bash
# size.sh: what berth's binary is made of (issue 17). Builds ./init as
# `make build` does, prints the stripped size, the bytes of symbols per
# module (go tool nm on an unstripped build; pclntab and type metadata
# are not in symbol sizes, so the column sums to less than the file), and
# fails when any reachable function makes the linker keep every exported
# method (a non-constant reflect Method/MethodByName: protobuf v1.36.10's
# descfmt with Go 1.26 did, which cost 3.6 MB).
set -euo pipefail
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export CGO_ENABLED=0 GOOS=linux GOARCH=amd64
go build -trimpath -ldflags '-s -w -dumpdep' -o "$tmp/berth" ./init 2> "$tmp/dumpdep"
go build -trimpath -o "$tmp/berth-syms" ./init
size=$(stat -c %s "$tmp/berth")
printf 'build/berth stripped: %d bytes (%.2f MiB)\n\n' "$size" "$(echo "$size / 1048576" | bc -l)"
go list -m all | awk '{print $1}' > "$tmp/mods"
go tool nm -size "$tmp/berth-syms" | awk -v mods="$tmp/mods" '
	BEGIN { while ((getline m < mods) > 0) modlist[m] = 1 }
	$3 ~ /^[bBU]$/ { next }
	# A zero-filled 32 MiB buffer the file does not hold.
	$4 == "crypto/internal/fips140/drbg.memory" { next }
	$4 == "go:func.*" { sum["(funcdata)"] += $2; next }
	{
		name = $4
		sub(/^(type:\.eq\.|type:|go:itab\.|go:)/, "", name)
		sub(/^\*+/, "", name)
		# The package path ends at the first dot after the last slash.
		n = split(name, parts, "/")
		last = parts[n]; sub(/\..*/, "", last)
		pkg = ""
		for (i = 1; i < n; i++) pkg = pkg parts[i] "/"
		pkg = pkg last
		best = ""
		for (m in modlist) if ((pkg == m || index(pkg, m "/") == 1) && length(m) > length(best)) best = m
		first = (n > 1) ? parts[1] : last
		if (best == "") best = (first ~ /\./) ? pkg : "std"
		sum[best] += $2
	}
	END { for (m in sum) if (sum[m] >= 10000) printf "%10d  %s\n", sum[m], m }
' | sort -rn
if grep -q '<ReflectMethod>' "$tmp/dumpdep"; then
	echo
	echo "reachable functions defeat dead method elimination:"
	grep '<ReflectMethod>' "$tmp/dumpdep" | sed 's/ -> .*//' | sort -u
	exit 1
fi
