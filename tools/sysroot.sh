#!/usr/bin/env bash
# sysroot.sh ARCH DIR: the node image's host programs for another
# architecture (issue 18). Reads, one a line on stdin, the host files the
# node image spec and the cluster images' specs copy (mkimage and mkoci
# -host-files, run against the builder's own /),
# finds the Debian package of each with dpkg -S on the builder, then
# downloads those packages for ARCH (apt-get download pkg:ARCH; dpkg's
# foreign architecture, which make deps adds) and unpacks them (dpkg -x)
# into DIR. The same package names serve both architectures: the
# libraries' packages are Multi-Arch: same, and arch-independent ones
# (netbase) are taken as they are.
#
# DIR/.packages lists pkg=version; when the list is unchanged nothing is
# done. A new list is unpacked into DIR.tmp and renamed into place, so an
# interrupted run leaves the old sysroot or none, never half of one.
set -euo pipefail
arch=${1:?usage: sysroot.sh ARCH DIR < host-files}
dir=${2:?usage: sysroot.sh ARCH DIR < host-files}
start=$(date +%s.%N)

# dpkg's database names a file by the path its package ships; on a
# merged-/usr builder the spec's /usr/sbin/mkfs.xfs is the package's
# /sbin/mkfs.xfs, so the other spelling is tried for what the first misses.
# One dpkg -S for all (a call per file costs seconds).
mapfile -t files < <(grep -v '^$' || true)
[ "${#files[@]}" -gt 0 ] || { echo "sysroot: no host files on stdin" >&2; exit 1; }
owners() { # "pkg:arch, pkg2: /path" lines; diversions are other lines
	dpkg -S "$@" 2>/dev/null | grep -v '^diversion' || true
}
found=$(owners "${files[@]}")
declare -A owned=()
while read -r path; do owned[$path]=1; done < <(sed -n 's/^[^/]*: \(\/.*\)$/\1/p' <<<"$found")
alts=()
for f in "${files[@]}"; do
	[ -n "${owned[$f]:-}" ] && continue
	case $f in /usr/*) alts+=("${f#/usr}") ;; *) alts+=("/usr$f") ;; esac
done
if [ "${#alts[@]}" -gt 0 ]; then
	found2=$(owners "${alts[@]}")
	while read -r path; do owned[$path]=1; done < <(sed -n 's/^[^/]*: \(\/.*\)$/\1/p' <<<"$found2")
	for a in "${alts[@]}"; do
		[ -n "${owned[$a]:-}" ] || { echo "sysroot: no installed package owns $a (nor its other /usr spelling) on this builder: run make deps" >&2; exit 1; }
	done
	found+=$'\n'"$found2"
fi
mapfile -t pkgs < <(sed -n 's/: \/.*//p' <<<"$found" | tr ',' '\n' | sed 's/^ *//; s/:.*//' | sort -u)

# The ARCH version of each: an arch-independent package has no :ARCH name.
specs=()
for p in "${pkgs[@]}"; do
	if [ "$(dpkg-query -W -f='${Architecture}' "$p" 2>/dev/null)" = all ]; then
		specs+=("$p")
	else
		specs+=("$p:$arch")
	fi
done
list=$(apt-cache show --no-all-versions "${specs[@]}" |
	awk -v arch="$arch" '/^Package:/{p=$2} /^Architecture:/{a=$2} /^Version:/{v=$2} /^$/{if(p!=""){print p (a=="all" ? "" : ":" a) "=" v}; p=""}
	END{if(p!="")print p (a=="all" ? "" : ":" a) "=" v}' | sort -u)
if [ "$(echo "$list" | wc -l)" -ne "${#specs[@]}" ]; then
	echo "sysroot: apt knows $(echo "$list" | wc -l) of ${#specs[@]} packages for $arch (${specs[*]}); run make deps ARCH=$arch (dpkg --add-architecture, apt-get update)" >&2
	echo "$list" >&2
	exit 1
fi

if [ -f "$dir/.packages" ] && [ "$(cat "$dir/.packages")" = "$list" ]; then
	echo "sysroot: $dir is up to date (${#specs[@]} packages)"
	exit 0
fi
echo "sysroot: unpacking ${#specs[@]} $arch packages into $dir"
rm -rf "$dir.tmp" && mkdir -p "$dir.tmp/.debs"
# apt-get download runs as _apt where it can: the directory must be its to write.
chmod 755 "$dir.tmp/.debs"
(cd "$dir.tmp/.debs" && apt-get download -q $list 2>&1 | grep -v '^W: Download is performed unsandboxed' || true)
n=$(ls "$dir.tmp/.debs"/*.deb | wc -l)
[ "$n" -eq "${#specs[@]}" ] || { echo "sysroot: downloaded $n of ${#specs[@]} packages" >&2; exit 1; }
for deb in "$dir.tmp/.debs"/*.deb; do
	dpkg -x "$deb" "$dir.tmp"
done
rm -rf "$dir.tmp/.debs"
echo "$list" > "$dir.tmp/.packages"
rm -rf "$dir.old"
if [ -d "$dir" ]; then mv "$dir" "$dir.old"; fi
mv "$dir.tmp" "$dir"
rm -rf "$dir.old"
printf 'sysroot: %s: %d packages, %s, in %.1f s\n' "$dir" "${#specs[@]}" "$(du -sh "$dir" | cut -f1)" "$(echo "$(date +%s.%N) - $start" | bc)"
