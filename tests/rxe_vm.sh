#!/bin/sh
# rxe_vm.sh BUILD_DIR COMMAND: run COMMAND (sh syntax, in the repository
# root) inside a QEMU guest that has a Soft-RoCE device, rxe0, so that the
# verbs transport runs for real on a machine without an RDMA NIC or the
# rdma_rxe module (docs/transports.md).
#
# The guest boots Debian's kernel (its package is downloaded once into
# BUILD_DIR/rxe-vm) with a busybox initramfs that loads rdma_rxe, virtio
# networking and 9p, mounts this machine's root read-only over 9p, puts
# tmpfs on /tmp, /run and /dev/shm, adds rxe0 on the guest's eth0 and runs
# COMMAND chrooted there: the same binaries, libraries and libibverbs
# providers as here. Exits with COMMAND's status; 77 (with a line saying
# "skipped: <why>") when the guest cannot be had.
#
# Needs qemu-system-x86, busybox-static, apt-get download (network once).
# RXE_VM_ACCEL: tcg (default; KVM on this development machine boots
# nothing) or kvm. RXE_VM_TIMEOUT: seconds for the whole guest (300).
set -u
build=${1:?usage: rxe_vm.sh BUILD_DIR COMMAND}
cmd=${2:?usage: rxe_vm.sh BUILD_DIR COMMAND}
accel=${RXE_VM_ACCEL:-tcg}
limit=${RXE_VM_TIMEOUT:-300}
dir="$build/rxe-vm"

skip() {
    echo "rxe_vm: skipped: $*"
    exit 77
}

command -v qemu-system-x86_64 >/dev/null || skip "qemu-system-x86_64 is not installed"
command -v busybox >/dev/null || skip "busybox is not installed (busybox-static)"
mkdir -p "$dir" || skip "cannot create $dir"

# Modules in load order: each after what its modinfo "depends=" names.
order=""
add_module() {
    local name file dep
    name=$(echo "$1" | tr - _)
    case " $order " in *" $name "*) return ;; esac
    file=$(awk -v n="$name" '{ b = $0; sub(/.*\//, "", b); sub(/\.ko$/, "", b);
                               gsub(/-/, "_", b); if (b == n) { print; exit } }' "$dir/modules.all")
    [ -n "$file" ] || skip "module $name is not in the kernel package"
    for dep in $(tr '\0' '\n' < "$file" | sed -n 's/^depends=//p' | tr , ' '); do
        add_module "$dep"
    done
    order="$order $name"
    cp "$file" "$dir/mods/$name.ko"
}

# The kernel (the package linux-image-amd64 points to) and the modules the
# guest needs, kept; the rest of the package (about 400 MB) is not.
if [ ! -f "$dir/ok" ]; then
    pkg=$(apt-cache depends linux-image-amd64 2>/dev/null |
          awk '/Depends: linux-image-[0-9]/ {print $2; exit}')
    [ -n "$pkg" ] || skip "apt-cache knows no linux-image-amd64 (run apt-get update)"
    rm -rf "$dir/kernel" "$dir/mods" "$dir"/linux-image-*.deb
    (cd "$dir" && apt-get download "$pkg" >/dev/null 2>&1) ||
        skip "apt-get download $pkg failed (no network?)"
    dpkg-deb -x "$dir"/linux-image-*.deb "$dir/kernel" || skip "cannot unpack $pkg"
    cp "$(ls "$dir"/kernel/boot/vmlinuz-* | head -n 1)" "$dir/vmlinuz" || skip "no kernel in $pkg"
    find "$dir"/kernel/lib/modules/*/kernel -name '*.ko' > "$dir/modules.all"
    mkdir -p "$dir/mods"
    for m in crc32_generic virtio_pci virtio_net 9pnet_virtio 9p rdma_rxe ib_uverbs; do
        add_module "$m"
    done
    echo "$order" > "$dir/mods/order"
    rm -rf "$dir/kernel" "$dir"/linux-image-*.deb "$dir/modules.all"
    touch "$dir/ok"
fi

rm -rf "$dir/initrd"
mkdir -p "$dir/initrd/bin" "$dir/initrd/proc" "$dir/initrd/sys" "$dir/initrd/dev" \
         "$dir/initrd/host"
cp -r "$dir/mods" "$dir/initrd/mods"
cp "$(command -v busybox)" "$dir/initrd/bin/busybox"

cat > "$dir/initrd/init" <<'EOF'
#!/bin/busybox sh
/bin/busybox --install -s /bin
mount -t proc proc /proc; mount -t sysfs sys /sys; mount -t devtmpfs dev /dev
for m in $(cat /mods/order); do insmod /mods/$m.ko || echo "rxe_vm: insmod $m failed"; done
mount -t 9p -o trans=virtio,version=9p2000.L,ro,msize=262144 hostroot /host
mount -t proc proc /host/proc; mount -t sysfs sys /host/sys; mount -t devtmpfs dev /host/dev
mkdir -p /host/dev/shm
mount -t tmpfs tmp /host/tmp; mount -t tmpfs shm /host/dev/shm; mount -t tmpfs run /host/run
# the repository again, on its own: a fresh /tmp above hides a clone there
repo=$(sed -n 's/.*rxerepo=\([^ ]*\).*/\1/p' /proc/cmdline | base64 -d)
mkdir -p "/host$repo" 2>/dev/null
mount -t 9p -o trans=virtio,version=9p2000.L,ro,msize=262144 repo "/host$repo" ||
    echo "rxe_vm: cannot mount the repository at $repo"
ip link set lo up; ip link set eth0 up; ip addr add 10.0.2.15/24 dev eth0
cmd=$(sed -n 's/.*rxecmd=\([^ ]*\).*/\1/p' /proc/cmdline | base64 -d)
echo "=== rxe_vm start: $(uname -r)"
chroot /host /bin/sh -c "ulimit -l unlimited; rdma link add rxe0 type rxe netdev eth0 && $cmd"
echo "=== rxe_vm rc=$?"
poweroff -f
EOF
chmod +x "$dir/initrd/init"
(cd "$dir/initrd" && find . | busybox cpio -o -H newc 2>/dev/null) | gzip -1 > "$dir/initrd.gz" ||
    skip "cannot pack the initramfs"

payload=$(printf 'cd %s && %s' "$(pwd)" "$cmd" | base64 -w0)
repo=$(pwd | base64 -w0)
# The kernel command line holds the command; it is capped at 2048 bytes.
[ $((${#payload} + ${#repo})) -lt 1750 ] || { echo "rxe_vm: command too long" >&2; exit 2; }
log="$dir/guest.log"
timeout -k 5 "$limit" qemu-system-x86_64 -accel "$accel" -cpu max -m 3072 -smp 2 \
    -nographic -no-reboot -kernel "$dir/vmlinuz" -initrd "$dir/initrd.gz" \
    -append "console=ttyS0 quiet panic=-1 rxecmd=$payload rxerepo=$repo" \
    -virtfs local,path=/,mount_tag=hostroot,security_model=none,readonly=on \
    -virtfs "local,path=$(pwd),mount_tag=repo,security_model=none,readonly=on" \
    -netdev user,id=n0 -device virtio-net-pci,netdev=n0 > "$log" 2>&1
qrc=$?
# The guest's output from the command on (not the firmware's screen).
sed -n '/=== rxe_vm start/,$p' "$log" | tr -d '\r'
rc=$(sed -n 's/.*=== rxe_vm rc=\([0-9]*\).*/\1/p' "$log" | tail -n 1)
if [ -z "$rc" ]; then
    [ "$qrc" -eq 124 ] && echo "rxe_vm: the guest ran past ${limit} s" >&2
    echo "rxe_vm: the guest did not finish (qemu exit $qrc; log $log)" >&2
    exit 1
fi
exit "$rc"
