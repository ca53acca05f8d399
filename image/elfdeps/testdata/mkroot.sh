#!/bin/sh
# Makes testdata/arm64root: a sysroot of tiny aarch64 ELF files laid out as
# Debian's arm64 packages unpack (dpkg -x), for the elfdeps and assemble
# tests. Needs binutils-aarch64-linux-gnu (make deps). The files are
# committed; run this only to change them.
set -eu
cd "$(dirname "$0")"
rm -rf arm64root && mkdir -p arm64root/lib/aarch64-linux-gnu arm64root/usr/lib/aarch64-linux-gnu/xtables arm64root/sbin arm64root/bin arm64root/etc
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
printf '.text\n.globl _start\n_start:\n ret\n' > "$tmp/a.s"
aarch64-linux-gnu-as -o "$tmp/a.o" "$tmp/a.s"
ld() { aarch64-linux-gnu-ld -z max-page-size=0x1000 -z common-page-size=0x1000 -z norelro --hash-style=gnu -s "$@" 2>/dev/null; }
L=arm64root/lib/aarch64-linux-gnu
U=arm64root/usr/lib/aarch64-linux-gnu
ld -shared -soname ld-linux-aarch64.so.1 -o $L/ld-linux-aarch64.so.1 "$tmp/a.o"
ld -shared -soname libbar.so.2 -o $U/libbar.so.2 "$tmp/a.o"
ld -shared -soname libfoo.so.1 -o $L/libfoo.so.1.2.3 "$tmp/a.o" -L$U -l:libbar.so.2
ln -s libfoo.so.1.2.3 $L/libfoo.so.1
# The loader's link is absolute, as in libc6:arm64: on the builder it would
# name the host's own file.
ln -s /lib/aarch64-linux-gnu/ld-linux-aarch64.so.1 arm64root/lib/ld-linux-aarch64.so.1
ld -shared -o $U/xtables/libxt_a.so "$tmp/a.o" -L$L -l:libfoo.so.1
ln -s libxt_a.so $U/xtables/libxt_b.so
ld -o arm64root/sbin/mke2fs "$tmp/a.o" --dynamic-linker /lib/ld-linux-aarch64.so.1 -L$L -l:libfoo.so.1
ln -s mke2fs arm64root/sbin/mkfs.ext4
ld -static -o arm64root/bin/busybox "$tmp/a.o"
echo 'tcp 6 TCP' > arm64root/etc/protocols
