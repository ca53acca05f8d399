#!/bin/sh
# Regenerates the sysfs fixture trees used by discover_test.go. They mirror
# what a Nitro EC2 instance shows (EBS root on nvme0 with partitions 1 and
# 128, instance-store namespaces on the other controllers; model strings are
# space-padded to 40 bytes as the NVMe identify data is), plus a QEMU guest
# and a native-multipath layout (device -> nvme-subsystem).
set -eu
cd "$(dirname "$0")"
pad() { printf '%-40s\n' "$1"; }

# ctrl TREE IDX MODEL SERIAL SECTORS [multipath]
ctrl() {
	t=$1 i=$2 model=$3 serial=$4 sectors=$5 mp=${6:-}
	pci=devices/pci0000:00/0000:00:1$i.0
	c=$t/sys/$pci/nvme/nvme$i
	mkdir -p "$c" "$t/sys/class/nvme" "$t/sys/block" "$t/sys/dev/block"
	pad "$model" >"$c/model"
	pad "$serial" >"$c/serial"
	ln -sfn "../../$pci/nvme/nvme$i" "$t/sys/class/nvme/nvme$i"
	if [ -n "$mp" ]; then
		s=$t/sys/devices/virtual/nvme-subsystem/nvme-subsys$i
		mkdir -p "$s/nvme${i}n1"
		pad "$model" >"$s/model"
		pad "$serial" >"$s/serial"
		b=devices/virtual/nvme-subsystem/nvme-subsys$i/nvme${i}n1
		ln -sfn ../../nvme-subsys$i "$t/sys/$b/device"
	else
		b=$pci/nvme/nvme$i/nvme${i}n1
		mkdir -p "$t/sys/$b"
		ln -sfn ../../nvme$i "$t/sys/$b/device"
	fi
	echo "$sectors" >"$t/sys/$b/size"
	echo "259:$((i * 10))" >"$t/sys/$b/dev"
	ln -sfn "../$b" "$t/sys/block/nvme${i}n1"
	ln -sfn "../../$b" "$t/sys/dev/block/259:$((i * 10))"
}

# part TREE IDX PARTNO: a partition of nvme<IDX>n1 (non-multipath layout)
part() {
	t=$1 i=$2 p=$3
	b=devices/pci0000:00/0000:00:1$i.0/nvme/nvme$i/nvme${i}n1
	mkdir -p "$t/sys/$b/nvme${i}n1p$p"
	echo "$p" >"$t/sys/$b/nvme${i}n1p$p/partition"
	echo "259:$((i * 10 + p % 10 + 1))" >"$t/sys/$b/nvme${i}n1p$p/dev"
	ln -sfn "../../$b/nvme${i}n1p$p" "$t/sys/dev/block/259:$((i * 10 + p % 10 + 1))"
}

ebs() {
	ctrl "$1" 0 "Amazon Elastic Block Store" vol0a1b2c3d4e5f60718 41943040
	part "$1" 0 1
	part "$1" 0 128
	# root on nvme0n1p1 (259:2), like AL2023
	printf '22 1 259:2 / / rw,relatime shared:1 - xfs /dev/nvme0n1p1 rw\n23 22 0:5 / /dev rw shared:2 - devtmpfs devtmpfs rw\n' >"$1/mountinfo"
}

rm -rf ec2-0 ec2-1 ec2-2 ec2-4 qemu multipath inuse
ebs ec2-0
ebs ec2-1
ctrl ec2-1 1 "Amazon EC2 NVMe Instance Storage" AWS1A2B3C4D5E6F70001 464843750
ebs ec2-2
for i in 1 2; do ctrl ec2-2 $i "Amazon EC2 NVMe Instance Storage" AWS1A2B3C4D5E6F7000$i 464843750; done
ebs ec2-4
for i in 1 2 3 4; do ctrl ec2-4 $i "Amazon EC2 NVMe Instance Storage" AWS1A2B3C4D5E6F7000$i 1831831216; done
# The same 4-disk box, but an extra EBS data volume (nvme5) attached too.
ctrl ec2-4 5 "Amazon Elastic Block Store" vol0ffffffffffffff05 20971520

# QEMU: virtio root, an NVMe "EBS" stand-in and two instance-store NVMe.
mkdir -p qemu
printf '22 1 254:1 / / ro shared:1 - erofs /dev/vda1 ro\n' >qemu/mountinfo
ctrl qemu 0 "QEMU NVMe Ctrl" ebs-stand-in 2097152
ctrl qemu 1 "QEMU NVMe Ctrl" berth-is-0 2097152
ctrl qemu 2 "QEMU NVMe Ctrl" berth-is-1 2097152

# Native NVMe multipath (CONFIG_NVME_MULTIPATH): block/nvmeXn1/device points
# at the subsystem, which carries model and serial.
mkdir -p multipath
printf '22 1 254:1 / / ro shared:1 - erofs /dev/vda1 ro\n' >multipath/mountinfo
for i in 1 2; do ctrl multipath $i "Amazon EC2 NVMe Instance Storage" AWSMP00$i 781250000 mp; done

# An instance-store disk that is already in use (a partition of it is
# mounted): discovery must skip it.
ebs inuse
for i in 1 2; do ctrl inuse $i "Amazon EC2 NVMe Instance Storage" AWS1A2B3C4D5E6F7000$i 464843750; done
part inuse 2 1
printf '99 22 259:22 / /data rw - ext4 /dev/nvme2n1p1 rw\n' >>inuse/mountinfo
