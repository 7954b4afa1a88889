#!/bin/bash
# cluster.sh: an emulated cluster on one machine. Makes N "hosts" as network
# namespaces joined by veth pairs to a bridge, shapes each host's link, starts
# one collrun per host in multi-host mode, runs a benchmark, reports busbw as
# a percentage of the link rate, and removes everything it made, also on
# Ctrl-C, SIGTERM, SIGHUP or when a step fails midway. With --lib gloo or
# --lib openmpi it runs the same benchmark with a peer library across the
# same namespaces and links instead (the peer benchmarks of bench/peers/).
#
#   bench/cluster.sh [--hosts 4] [--ranks-per-host 1] [--rate 1gbit] [--loss 0%]
#                    [--partition HOST[@SECONDS]] [--timeout 300] [--keep]
#                    [--lib libcoll|gloo|openmpi] [--build DIR] [--] [BENCH [ARGS...]]
#   bench/cluster.sh --cleanup        # remove what killed runs left behind
#
# Default benchmark: all_reduce_perf -b 1M -e 32M -f 2 -c 1 (from DIR/bin).
#
# Peers (--lib): the same benchmark name and sizes, run by the peer
# benchmark built by bench/peers/Makefile (DIR/peers/), which writes the same
# CSV as coll_perf: BENCH all_reduce_perf, all_gather_perf, broadcast_perf,
# reduce_perf, reduce_scatter_perf or alltoall_perf becomes its -C collective;
# of ARGS it takes -b -e -f -n -w -c -r, -d float, -o sum and -a 3 (the peers
# always time a call as the mean per call, max over ranks); anything else is
# refused (exit 2).
#   gloo     one gloo_perf per host: ip netns exec <host> gloo_perf --rank i
#            --nranks N --store RUNDIR/gloo-store --host <host's address>
#            (Gloo has no launcher; the ranks meet in a FileStore directory,
#            which all namespaces see). One rank per host only.
#   openmpi  mpirun.openmpi started in host 0 with --host <the hosts'
#            addresses>:K, --bind-to none (every namespace sees the same
#            cores), --mca plm_rsh_agent RUNDIR/rsh-agent (in place of ssh: it
#            runs Open MPI's "ADDRESS COMMAND..." in ADDRESS's namespace with
#            ip netns exec), --mca plm_rsh_no_tree_spawn 1, --mca btl tcp,self
#            --mca pml ob1 --mca btl_tcp_if_include eth0 --mca
#            oob_tcp_if_include eth0, --allow-run-as-root. OMPI_MCA_*
#            variables in the environment reach it (e.g.
#            OMPI_MCA_mpi_yield_when_idle=1).
#
# What is modelled:
#   - rate: every host's link is shaped in both directions with tc tbf, on the
#     host's egress (its end of the veth) and on the bridge port's egress
#     toward it, so a host sends at most RATE and receives at most RATE;
#   - loss: an nftables rule inside each host namespace drops each frame that
#     arrives on the host's link with probability LOSS (numgen random mod
#     10000, so 0.01% steps); ACKs are frames too. Between two hosts a frame
#     is dropped at most once, where it arrives. Segmentation offload is off
#     on lossy links so that the rule sees single frames, as on a wire;
#   - partition: a host's link drops everything in both directions, from the
#     start or SECONDS after the job starts. COLL_TIMEOUT is then 10 s unless
#     set, so the job fails with libcoll's timeout naming a peer.
# What is NOT modelled:
#   - delay and jitter: this kernel has no sch_netem, and tbf has no delay, so
#     the path has the veth/bridge latency only (a few microseconds); any
#     latency-bound result is better than on a real network;
#   - separate machines: all hosts share this machine's cores and memory. On 2
#     cores, 4 hosts plus the kernel's TCP, bridge and tbf work are CPU-bound
#     long before a fast link is full: a low percentage of link rate can mean
#     "CPU-bound", not "slow protocol". Use a low rate (e.g. 1gbit) to be
#     network-bound.
#   - intra-host links: with --ranks-per-host K > 1, the ranks of one host
#     share a namespace and so a host identity: libcoll joins them with its
#     shared-memory transport (-T tcp: TCP to the host's own address, which
#     the kernel routes over lo), Open MPI with its own; either way
#     unshaped, lossless, never partitioned.
#
# Layout (prefix P = lcc<pid of this script>, so concurrent runs never clash):
#   ${P}sw         bridge br0 and ports p0..p{N-1}
#   ${P}h<i>       host i: lo, eth0 = 10.A.B.(i+1)/24, veth to p<i>
# Nothing is added to the root namespace: creating a namespace's veth end
# directly in it ("peer ... netns") keeps both ends out of the root namespace,
# and deleting a namespace deletes its veth (and so the pair).
#
# Exit status: the job's (0 when every host's collrun exited 0 and no result
# was wrong); a failed host's collrun status (the first to fail; 124 when it
# ran past --timeout); 1 when results were wrong (#wrong > 0) or setup
# failed; 2 usage error; 77 skipped (not root, or no network namespaces, tc
# tbf or nftables, or the peer's benchmark or launcher missing: the reason is
# printed); 128+signal when interrupted. With a peer, its launcher stands for
# collrun: each host's gloo_perf, or mpirun (one job, started in host 0).
set -u
# The whole script is one { ... } block: bash parses it completely before
# running it, so editing this file cannot break a run in progress.
{

# A non-interactive shell starts background commands with SIGINT ignored, and
# bash cannot trap a signal that was ignored on entry: start again with the
# default disposition, so that SIGINT still ends the run and cleans up.
if [ -z "${CLUSTER_SH_REEXEC:-}" ] && sigign=$(awk '/^SigIgn:/ { print $2 }' /proc/$$/status 2>/dev/null) &&
    [ -n "$sigign" ] && (((16#$sigign >> 1) & 1)) && env --default-signal=INT true 2>/dev/null; then
    export CLUSTER_SH_REEXEC=1
    exec env --default-signal=INT "$BASH" "$0" "$@"
fi
unset CLUSTER_SH_REEXEC

PROG=cluster.sh
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
TOP="$(dirname "$HERE")"
NS_RE='^lcc([0-9]+)(sw|h[0-9]+)$'   # namespaces this script makes
MASTER_PORT=29500                    # fixed: every run has its own namespaces
GRACE_S=15      # after one host fails, the others get this long to fail too
QLAT_MS=20      # tbf queue: what is queued beyond this much time is dropped
DEFAULT_BENCH=all_reduce_perf
DEFAULT_ARGS=(-b 1M -e 32M -f 2 -c 1)

HOSTS=4 RPH=1 RATE=1gbit LOSS=0% PARTITION="" TIMEOUT=300 KEEP=0 CLEANUP=0 LIB=libcoll
BUILD="$TOP/build"

usage() {
    cat <<EOF
usage: $PROG [options] [--] [BENCH [ARGS...]]
       $PROG --cleanup
  --hosts N              hosts (network namespaces), 2..200 (default 4)
  --ranks-per-host K     ranks in each host, 1..64 (default 1)
  --rate R               link rate each way, e.g. 100mbit, 1gbit, 2.5gbit; none
                         leaves links unshaped (default 1gbit)
  --loss P               random loss of each frame a host receives, e.g. 1%,
                         0.05% (default 0%)
  --partition H[@S]      host H drops everything on its link, from the start or
                         S seconds after the job starts (sets COLL_TIMEOUT=10s
                         unless COLL_TIMEOUT is set)
  --timeout S            bound on each host's collrun, seconds (default 300)
  --keep                 keep the directory with each host's output
  --lib L                libcoll, gloo or openmpi: which library runs the
                         benchmark (default libcoll); gloo and openmpi run
                         DIR/peers/gloo_perf or mpi_perf.openmpi (make -f
                         bench/peers/Makefile BUILD=DIR) with BENCH's
                         collective and sizes
  --cleanup              remove namespaces left by killed runs, then exit
  --build DIR            build directory with bin/collrun and the benchmark,
                         and peers/ for --lib (default $TOP/build)
BENCH is a name in DIR/bin or a path (default $DEFAULT_BENCH ${DEFAULT_ARGS[*]}).
Needs root; without it prints 'skipped: needs root' and exits 77.
EOF
}

die_usage() {
    echo "$PROG: $*" >&2
    echo "Try '$PROG --help' for more information." >&2
    exit 2
}

say() { echo "cluster: $*"; }
warn() { echo "cluster: $*" >&2; }

skip() {
    echo "skipped: $*"
    exit 77
}

is_uint() { [[ $1 =~ ^[0-9]+$ ]]; }
is_num() { [[ $1 =~ ^[0-9]+(\.[0-9]+)?$ ]]; }

# Rate in bits/s from tc-style decimal units (kbit = 1000 bit). tc's "bps"
# units are bytes/s; they are refused here rather than misread.
rate_bps() {
    local r="${1,,}"
    [[ $r =~ ^([0-9]+(\.[0-9]+)?)(bit|kbit|mbit|gbit|tbit)$ ]] || return 1
    awk -v n="${BASH_REMATCH[1]}" -v u="${BASH_REMATCH[3]}" 'BEGIN {
        m = u == "bit" ? 1 : u == "kbit" ? 1e3 : u == "mbit" ? 1e6 : u == "gbit" ? 1e9 : 1e12
        v = n * m; if (v < 8000) exit 1; printf "%.0f\n", v }'
}

# Loss in hundredths of a percent (the numgen modulus is 10000).
loss_bp() {
    local l="${1%\%}"
    is_num "$l" || return 1
    awk -v p="$l" 'BEGIN { if (p > 100) exit 1; printf "%.0f\n", p * 100 }'
}

# ---- options ---------------------------------------------------------------------

need_val() { [ $# -ge 2 ] || die_usage "$1 needs a value"; }

while [ $# -gt 0 ]; do
    opt="$1" val=""
    case "$opt" in
    --*=*) val="${opt#*=}"; opt="${opt%%=*}"; set -- "$opt" "$val" "${@:2}" ;;
    esac
    case "$opt" in
    -h | --help) usage; exit 0 ;;
    --hosts) need_val "$@"; HOSTS="$2"; shift 2 ;;
    --ranks-per-host) need_val "$@"; RPH="$2"; shift 2 ;;
    --rate) need_val "$@"; RATE="$2"; shift 2 ;;
    --loss) need_val "$@"; LOSS="$2"; shift 2 ;;
    --partition) need_val "$@"; PARTITION="$2"; shift 2 ;;
    --timeout) need_val "$@"; TIMEOUT="$2"; shift 2 ;;
    --build) need_val "$@"; BUILD="$2"; shift 2 ;;
    --lib) need_val "$@"; LIB="$2"; shift 2 ;;
    --keep) KEEP=1; shift ;;
    --cleanup) CLEANUP=1; shift ;;
    --) shift; break ;;
    -*) die_usage "unknown option '$opt'" ;;
    *) break ;;
    esac
done

if [ $# -gt 0 ]; then
    BENCH="$1"; shift
    BENCH_ARGS=("$@")
else
    BENCH="$DEFAULT_BENCH"
    BENCH_ARGS=("${DEFAULT_ARGS[@]}")
fi

is_uint "$HOSTS" && [ "$HOSTS" -ge 2 ] && [ "$HOSTS" -le 200 ] ||
    die_usage "--hosts '$HOSTS': expected 2..200"
is_uint "$RPH" && [ "$RPH" -ge 1 ] && [ "$RPH" -le 64 ] ||
    die_usage "--ranks-per-host '$RPH': expected 1..64"
is_uint "$TIMEOUT" && [ "$TIMEOUT" -ge 1 ] && [ "$TIMEOUT" -le 86400 ] ||
    die_usage "--timeout '$TIMEOUT': expected 1..86400 seconds"
if [ "$RATE" = none ]; then
    RATE_BPS=0
else
    RATE_BPS=$(rate_bps "$RATE") || die_usage "--rate '$RATE': expected e.g. 100mbit, 1gbit (at least 8kbit) or none"
fi
LOSS_BP=$(loss_bp "$LOSS") || die_usage "--loss '$LOSS': expected a percentage 0..100, e.g. 1% or 0.05%"
[ "$LOSS_BP" != 0 ] || [[ ${LOSS%\%} =~ ^0*(\.0*)?$ ]] || die_usage "--loss '$LOSS': the smallest loss is 0.01%"
PART_HOST="" PART_AT=""
if [ -n "$PARTITION" ]; then
    [[ $PARTITION =~ ^([0-9]+)(@([0-9]+(\.[0-9]+)?))?$ ]] ||
        die_usage "--partition '$PARTITION': expected HOST or HOST@SECONDS"
    PART_HOST="${BASH_REMATCH[1]}" PART_AT="${BASH_REMATCH[3]:-0}"
    [ "$PART_HOST" -lt "$HOSTS" ] || die_usage "--partition: host $PART_HOST is not in 0..$((HOSTS - 1))"
fi

# The peer benchmarks (bench/peers/) take coll_perf's common options: map
# BENCH to their -C collective and ARGS to theirs, refusing what they do not
# measure rather than measuring something else.
PEER_ARGS=()
peer_args() {
    local name a="" bench_name
    bench_name=$(basename "$BENCH")
    name=${bench_name%_perf}
    case "$name" in
    all_reduce | all_gather | broadcast | reduce | reduce_scatter | alltoall) ;;
    *) die_usage "--lib $LIB: '$bench_name' has no counterpart in the peer benchmarks (they run all_reduce_perf, all_gather_perf, broadcast_perf, reduce_perf, reduce_scatter_perf and alltoall_perf)" ;;
    esac
    PEER_ARGS=(-C "$name")
    set -- "${BENCH_ARGS[@]}"
    while [ $# -gt 0 ]; do
        case "$1" in
        -b | -e | -f | -n | -w | -c | -r | -d | -o | -a)
            [ $# -ge 2 ] || die_usage "--lib $LIB: $bench_name option $1 needs a value"
            a="$2" ;;
        esac
        case "$1" in
        -b | -e | -f | -n | -w | -c | -r) PEER_ARGS+=("$1" "$a"); shift 2 ;;
        -d) [ "$a" = float ] || die_usage "--lib $LIB: -d $a: the peer benchmarks measure -d float only"
            shift 2 ;;
        -o) [ "$a" = sum ] || die_usage "--lib $LIB: -o $a: the peer benchmarks measure -o sum only"
            shift 2 ;;
        -a) [ "$a" = 3 ] || die_usage "--lib $LIB: -a $a: the peer benchmarks time a call as the mean per call, max over ranks (-a 3) only"
            shift 2 ;;
        *) die_usage "--lib $LIB: '$1' is not an option the peer benchmarks take (they take -b -e -f -n -w -c -r with a value each, -d float, -o sum, -a 3; the script adds --csv)" ;;
        esac
    done
}
case "$LIB" in
libcoll) ;;
gloo | openmpi)
    peer_args
    [ "$LIB" = openmpi ] || [ "$RPH" = 1 ] ||
        die_usage "--lib gloo runs one rank per host (--ranks-per-host $RPH)"
    ;;
*) die_usage "--lib '$LIB': expected libcoll, gloo or openmpi" ;;
esac

# ---- capabilities -----------------------------------------------------------------

[ "$(id -u)" = 0 ] || skip "needs root (network namespaces, tc and nftables need CAP_NET_ADMIN)"
command -v ip >/dev/null || skip "needs iproute2 (ip) for network namespaces"
ip netns list >/dev/null 2>&1 || skip "this system has no network namespace support (ip netns list failed)"
if [ "$CLEANUP" = 0 ]; then
    [ "$RATE_BPS" = 0 ] || command -v tc >/dev/null || skip "needs tc (iproute2) for --rate"
    command -v nft >/dev/null || skip "needs nftables (nft) for loss and partitions"
    command -v timeout >/dev/null || skip "needs timeout (coreutils)"
fi

our_namespaces() {  # our_namespaces [PREFIX]: names matching NS_RE (and PREFIX)
    ip netns list 2>/dev/null | awk '{print $1}' | while read -r ns; do
        [[ $ns =~ $NS_RE ]] || continue
        [ -z "${1:-}" ] || [ "lcc${BASH_REMATCH[1]}" = "$1" ] || continue
        echo "$ns"
    done
}

# Kill whatever runs inside the namespaces, then delete them (hosts first;
# each deletion takes the namespace's veth end and so the whole pair).
remove_namespaces() {
    local ns pids left t
    for ns in "$@"; do
        pids=$(ip netns pids "$ns" 2>/dev/null)
        [ -n "$pids" ] && kill -TERM $pids 2>/dev/null
    done
    for ((t = 0; t < 20; t++)); do
        left=""
        for ns in "$@"; do left="$left$(ip netns pids "$ns" 2>/dev/null)"; done
        [ -z "$left" ] && break
        sleep 0.1
    done
    for ns in "$@"; do
        pids=$(ip netns pids "$ns" 2>/dev/null)
        [ -n "$pids" ] && kill -KILL $pids 2>/dev/null
    done
    for ns in "$@"; do [[ $ns == *sw ]] || ip netns del "$ns" 2>/dev/null; done
    for ns in "$@"; do [[ $ns == *sw ]] && ip netns del "$ns" 2>/dev/null; done
    return 0
}

# A prefix is in use while its pid is a running cluster.sh.
prefix_live() {
    local pid="$1"
    [ "$pid" != "$$" ] && [ -r "/proc/$pid/cmdline" ] &&
        tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q 'cluster\.sh'
}

if [ "$CLEANUP" = 1 ]; then
    removed=0 kept=0
    declare -A seen=()
    for ns in $(our_namespaces); do
        [[ $ns =~ $NS_RE ]]
        pid="${BASH_REMATCH[1]}"
        if prefix_live "$pid"; then
            [ -z "${seen[$pid]:-}" ] && say "lcc$pid* belongs to running pid $pid: left alone"
            seen[$pid]=1
            kept=$((kept + 1))
            continue
        fi
        remove_namespaces "$ns"
        removed=$((removed + 1))
    done
    say "removed $removed namespace(s) left by earlier runs$([ "$kept" = 0 ] || echo ", kept $kept in use")"
    exit 0
fi

# ---- the run --------------------------------------------------------------------

P="lcc$$"
case "$LIB" in
libcoll)
    COLLRUN="$BUILD/bin/collrun"
    case "$BENCH" in
    */*) ;;
    *) BENCH="$BUILD/bin/$BENCH" ;;
    esac
    [ -x "$COLLRUN" ] || { warn "no $COLLRUN: build first (make BUILD=$BUILD)"; exit 1; }
    [ -x "$BENCH" ] || { warn "no benchmark $BENCH (built? see --build)"; exit 1; }
    COLLRUN="$(cd "$(dirname "$COLLRUN")" && pwd)/collrun"
    BENCH="$(cd "$(dirname "$BENCH")" && pwd)/$(basename "$BENCH")"
    LAUNCHER=collrun NJOBS=$HOSTS
    ;;
gloo)
    PEER_BIN="$BUILD/peers/gloo_perf"
    [ -x "$PEER_BIN" ] || skip "--lib gloo: no $PEER_BIN (make -f bench/peers/Makefile BUILD=$BUILD; needs libgloo-dev and g++)"
    LAUNCHER=gloo_perf NJOBS=$HOSTS
    ;;
openmpi)
    PEER_BIN="$BUILD/peers/mpi_perf.openmpi"
    command -v mpirun.openmpi >/dev/null || skip "--lib openmpi: no mpirun.openmpi (openmpi-bin)"
    [ -x "$PEER_BIN" ] || skip "--lib openmpi: no $PEER_BIN (make -f bench/peers/Makefile BUILD=$BUILD; needs libopenmpi-dev)"
    LAUNCHER=mpirun NJOBS=1   # one mpirun, in host 0, for every host
    ;;
esac
if [ "$LIB" != libcoll ]; then
    PEER_BIN="$(cd "$(dirname "$PEER_BIN")" && pwd)/$(basename "$PEER_BIN")"
fi

NS_MADE=()      # every namespace made so far, for cleanup
HOST_PIDS=()    # per job (one per host; openmpi: one): pid of its `timeout ...`
HOST_RC=()      # per host: exit status, once known
HOST_T=()       # per host: seconds from the start to its end
RUNDIR=""
EXIT_RC=1
CLEANED=0

cleanup() {
    local rc=$? i t running=() left
    [ "$CLEANED" = 1 ] && return
    CLEANED=1
    trap '' INT TERM HUP   # a second Ctrl-C must not stop the cleanup midway
    # 1. End the jobs still running (those not yet reaped, so that no pid can
    # have been reused): timeout passes SIGTERM to collrun, which ends its
    # ranks within its --kill-grace.
    for i in "${!HOST_PIDS[@]}"; do [ -n "${HOST_RC[i]:-}" ] || running+=("${HOST_PIDS[i]}"); done
    if [ "${#running[@]}" != 0 ]; then
        kill -TERM "${running[@]}" 2>/dev/null
        for ((t = 0; t < 50; t++)); do
            kill -0 "${running[@]}" 2>/dev/null || break
            sleep 0.1
        done
        kill -KILL "${running[@]}" 2>/dev/null
    fi
    # 2. Anything still inside a namespace is killed, then the namespaces go.
    # shellcheck disable=SC2046 # one namespace name per word, no blanks in them
    remove_namespaces "${NS_MADE[@]}" $(our_namespaces "$P")
    left=$(our_namespaces "$P" | wc -l)
    if [ "$left" != 0 ]; then
        warn "could not remove $left namespace(s) of $P: run $PROG --cleanup"
    fi
    if [ -n "$RUNDIR" ]; then
        if [ "$KEEP" = 1 ]; then say "output kept in $RUNDIR"; else rm -rf "$RUNDIR"; fi
    fi
    exit "$rc"
}
trap cleanup EXIT
trap 'warn "interrupted (SIGINT): removing everything"; exit 130' INT
trap 'warn "terminated (SIGTERM): removing everything"; exit 143' TERM
trap 'warn "hangup (SIGHUP): removing everything"; exit 129' HUP

setup_fail() {
    warn "setup failed: $*"
    exit 1
}

# A free 10.A.B.0/24 (A.B from our pid): the namespaces are isolated from
# the root namespace, but a subnet the machine already uses would make logs
# and addresses ambiguous, so skip those.
pick_subnet() {
    local a b k used
    used=$( (ip -4 -o addr show; ip -4 route show table all) 2>/dev/null)
    for ((k = 0; k < 256; k++)); do
        a=$((64 + ($$ / 256 + k) % 128)) b=$((($$ + k) % 256))
        grep -q " 10\.$a\.$b\.\|^10\.$a\.$b\." <<<"$used" || { echo "10.$a.$b"; return; }
    done
    echo "10.$a.$b"
}

# tbf burst (bytes): the bucket refills at RATE and holds at most BURST, so
# after an idle gap a host may send BURST at veth speed, and any interval T
# carries at most BURST + RATE*T. Too small a bucket starves TCP: the timer
# that dequeues runs late on 2 busy cores (softirqs, tens to hundreds of
# microseconds), tokens beyond BURST are lost meanwhile and the link falls
# below RATE. Too large a bucket lets short transfers (a 64 KiB all-reduce
# moves ~100 KB per link) run faster than RATE. So: 1 ms at RATE (125 KB at
# 1gbit; measured: a bulk TCP stream gets 95.3-95.7% of RATE, the TCP/IP ceiling
# is 95.6%), at least 10 frames. Below ~550 Mbit/s one offload packet (64 KiB
# + headers) no longer fits and tbf cuts it into frames itself, which is
# cheap at those packet rates.
burst_bytes() {
    awk -v r="$RATE_BPS" 'BEGIN { b = r / 8 / 1000; if (b < 15140) b = 15140; printf "%.0f\n", b }'
}

shape() {  # shape NS DEV
    tc -n "$1" qdisc replace dev "$2" root tbf rate "${RATE_BPS}bit" burst "$BURST" \
        latency "${QLAT_MS}ms" || setup_fail "tc tbf on $2 in $1"
}

nft_host() {  # nft_host I COMMANDS: nft inside host I's namespace
    ip netns exec "${P}h$1" nft -f - <<<"$2"
}

# Partition: the host's link drops everything, in and out (lo still works).
partition_now() {
    nft_host "$PART_HOST" "add rule inet libcoll_cluster egress oifname \"eth0\" counter drop
add rule inet libcoll_cluster ingress iifname \"eth0\" counter drop" ||
        { warn "could not partition host $PART_HOST"; return 1; }
    say "host $PART_HOST partitioned (all its link traffic dropped) at $(elapsed) s"
}

setup() {
    local i h
    SUBNET=$(pick_subnet)
    ip netns add "${P}sw" 2>/dev/null || {
        # The pid is ours, so a namespace with our prefix is a dead run's.
        if [ -n "$(our_namespaces "$P")" ]; then
            warn "removing namespaces left by an earlier run with pid $$"
            # shellcheck disable=SC2046 # one name per word, as above
            remove_namespaces $(our_namespaces "$P")
        fi
        ip netns add "${P}sw" || skip "cannot create a network namespace (ip netns add failed)"
    }
    NS_MADE+=("${P}sw")
    ip -n "${P}sw" link set lo up || setup_fail "lo in ${P}sw"
    ip -n "${P}sw" link add br0 type bridge || setup_fail "bridge in ${P}sw"
    ip -n "${P}sw" link set br0 up || setup_fail "bridge up"
    for ((i = 0; i < HOSTS; i++)); do
        h="${P}h$i"
        ip netns add "$h" || setup_fail "ip netns add $h"
        NS_MADE+=("$h")
        # No IPv6: router solicitations and MLD would be stray traffic.
        ip netns exec "$h" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 2>/dev/null
        ip -n "$h" link set lo up || setup_fail "lo in $h"
        ip -n "${P}sw" link add "p$i" type veth peer name eth0 netns "$h" ||
            setup_fail "veth p$i <-> $h/eth0"
        ip -n "${P}sw" link set "p$i" master br0 up || setup_fail "p$i on br0"
        ip -n "$h" addr add "$SUBNET.$((i + 1))/24" dev eth0 || setup_fail "address of $h"
        ip -n "$h" link set eth0 up || setup_fail "eth0 up in $h"
        if [ "$RATE_BPS" != 0 ]; then
            shape "$h" eth0      # what host i sends
            shape "${P}sw" "p$i" # what host i receives
        fi
        nft_host "$i" "table inet libcoll_cluster {
  chain egress { type filter hook output priority 0; policy accept; }
  chain ingress { type filter hook input priority 0; policy accept; }
}" || skip "nftables does not work in a network namespace here"
        if [ "$LOSS_BP" != 0 ]; then
            # Loss is applied where a frame arrives, so that the sender's TCP
            # has counted it as sent and must notice the loss (a drop in the
            # sender's own output hook is a local error that TCP simply
            # retries: no loss at all). Frames, not offload packets: without
            # segmentation offload on the host's link the kernel cuts TCP's
            # 64 KiB packets into frames before they leave, so each frame is
            # dropped on its own, as on a wire (this costs CPU).
            ip netns exec "$h" ethtool -K eth0 tso off gso off gro off >/dev/null 2>&1 ||
                [ "$i" != 0 ] || warn "ethtool -K eth0 gso off failed: loss hits offload packets of up to 64 KiB, not frames"
            nft_host "$i" "add rule inet libcoll_cluster ingress iifname \"eth0\" numgen random mod 10000 < $LOSS_BP counter drop" ||
                setup_fail "loss rule in $h"
        fi
    done
}

T0=""
elapsed() { awk -v a="$EPOCHREALTIME" -v b="$T0" 'BEGIN { printf "%.1f\n", a - b }'; }

# ---- start ----------------------------------------------------------------------

RUNDIR=$(mktemp -d "${TMPDIR:-/tmp}/cluster-$P.XXXXXX") || setup_fail "mktemp"
if [ "$RATE_BPS" != 0 ]; then BURST=$(burst_bytes); fi
setup

NRANKS=$((HOSTS * RPH))
say "$HOSTS hosts x $RPH rank(s) = $NRANKS ranks; namespaces ${P}h0..${P}h$((HOSTS - 1)), bridge in ${P}sw; $SUBNET.1-$HOSTS/24 on eth0"
if [ "$RATE_BPS" != 0 ]; then
    say "each host link, both directions: tbf rate $RATE burst $BURST B latency ${QLAT_MS}ms"
else
    say "links unshaped (--rate none)"
fi
say "loss: $LOSS of the frames each host receives; partition: ${PARTITION:-none}; delay/jitter: not emulated (no netem in this kernel)"
say "TCP congestion control: $(ip netns exec "${P}h0" sysctl -n net.ipv4.tcp_congestion_control 2>/dev/null || echo unknown) (the machine's default)"

export COLL_SECRET   # in the environment, not on command lines that ps shows
COLL_SECRET=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')
export COLL_SOCKET_IFNAME="=eth0"  # every rank uses its host's link, never lo
if [ -n "$PART_HOST" ] && [ -z "${COLL_TIMEOUT:-}" ]; then export COLL_TIMEOUT=10s; fi

# nccl-tests-style benchmarks write their results as CSV: parse that.
CSV=""
case "$(basename "$BENCH")" in
*_perf) [[ " ${BENCH_ARGS[*]} " == *" --csv "* ]] || CSV=1 ;;
esac

# Open MPI's stand-in for ssh: mpirun runs "AGENT [ssh options] ADDRESS
# COMMAND...", as it would run ssh; the agent runs COMMAND (Open MPI's orted
# with its arguments, quoted for a remote shell) by /bin/sh in the namespace
# that owns ADDRESS, as sshd would run it by the login shell.
write_rsh_agent() {
    local i
    {
        echo '#!/bin/bash'
        echo "# Written by $PROG (pid $$) for one run: mpirun's plm_rsh_agent."
        echo 'set -u'
        echo 'while [ $# -gt 0 ]; do'
        echo '    case "$1" in -[bcDeEFiIJlLmoOpQRSwW]) shift 2 ;; -*) shift ;; *) break ;; esac'
        echo 'done'
        echo '[ $# -ge 2 ] || { echo "rsh-agent: expected ADDRESS COMMAND..." >&2; exit 255; }'
        echo 'case "$1" in'
        for ((i = 0; i < HOSTS; i++)); do echo "$SUBNET.$((i + 1))) ns=${P}h$i ;;"; done
        echo '*) echo "rsh-agent: $1 is not a host of this cluster ('"$SUBNET.1-$HOSTS"')" >&2; exit 255 ;;'
        echo 'esac'
        echo 'shift'
        echo 'exec ip netns exec "$ns" /bin/sh -c "$*"'
    } >"$RUNDIR/rsh-agent" && chmod 700 "$RUNDIR/rsh-agent"
}

# What each job runs: start_job J starts job J in the background.
start_job() {
    local i="$1" extra=() hostlist="" k
    case "$LIB" in
    libcoll)
        [ -n "$CSV" ] && extra=(--csv "$RUNDIR/host$i.csv")
        timeout -k 10 "$TIMEOUT" ip netns exec "${P}h$i" "$COLLRUN" --tag-output \
            --nnodes "$HOSTS" --node-rank "$i" --master-addr "$SUBNET.1" \
            --master-port "$MASTER_PORT" --kill-grace 2 -n "$RPH" --bind-to none -- \
            "$BENCH" "${BENCH_ARGS[@]}" "${extra[@]}" \
            >"$RUNDIR/host$i.out" 2>"$RUNDIR/host$i.err" </dev/null &
        ;;
    gloo)
        timeout -k 10 "$TIMEOUT" ip netns exec "${P}h$i" "$PEER_BIN" --rank "$i" \
            --nranks "$HOSTS" --store "$RUNDIR/gloo-store" --host "$SUBNET.$((i + 1))" \
            "${PEER_ARGS[@]}" --csv "$RUNDIR/host$i.csv" \
            >"$RUNDIR/host$i.out" 2>"$RUNDIR/host$i.err" </dev/null &
        ;;
    openmpi)
        for ((k = 0; k < HOSTS; k++)); do hostlist="$hostlist${hostlist:+,}$SUBNET.$((k + 1)):$RPH"; done
        # shellcheck disable=SC2054 # tcp,self is one MCA value
        timeout -k 10 "$TIMEOUT" ip netns exec "${P}h0" mpirun.openmpi --allow-run-as-root \
            -np "$NRANKS" --host "$hostlist" --bind-to none \
            --mca plm_rsh_agent "$RUNDIR/rsh-agent" --mca plm_rsh_no_tree_spawn 1 \
            --mca btl tcp,self --mca pml ob1 --mca btl_tcp_if_include eth0 \
            --mca oob_tcp_if_include eth0 \
            "$PEER_BIN" "${PEER_ARGS[@]}" --csv "$RUNDIR/host0.csv" \
            >"$RUNDIR/host0.out" 2>"$RUNDIR/host0.err" </dev/null &
        ;;
    esac
    HOST_PIDS[i]=$!
}

case "$LIB" in
libcoll) RUNNING="$(basename "$BENCH") ${BENCH_ARGS[*]}" ;;
gloo) CSV=1 RUNNING="gloo_perf ${PEER_ARGS[*]}, one per host"
    mkdir "$RUNDIR/gloo-store" || setup_fail "mkdir $RUNDIR/gloo-store" ;;
openmpi) CSV=1 RUNNING="mpirun.openmpi (in host 0, $RPH rank(s) per host) mpi_perf.openmpi ${PEER_ARGS[*]}"
    write_rsh_agent || setup_fail "cannot write $RUNDIR/rsh-agent" ;;
esac
say "library: $LIB; running $RUNNING (COLL_TIMEOUT=${COLL_TIMEOUT:-default}, at most $TIMEOUT s per $LAUNCHER)"
T0=$EPOCHREALTIME
[ "$PART_AT" = 0 ] && [ -n "$PART_HOST" ] && partition_now
for ((i = 0; i < NJOBS; i++)); do start_job "$i"; done

# Wait for every job (one per host; openmpi: the one mpirun); each is bounded
# by timeout. When one fails, the others get GRACE_S to report their own view
# of it, then they are ended.
FIRST_FAIL="" FAIL_T="" left=$NJOBS part_done=0 ended_by_us=() shown=0

# Host 0's output as it comes (rank 0 prints the table), whole lines only,
# without collrun's "[rank] " tags; flush_host0 all also prints a last line
# that has no newline.
show_host0() {
    local n
    n=$(wc -l <"$RUNDIR/host0.out")
    [ "${1:-}" = all ] && [ -n "$(tail -c 1 "$RUNDIR/host0.out")" ] && n=$((n + 1))
    [ "$n" -gt "$shown" ] || return 0
    sed -n "$((shown + 1)),${n}p" "$RUNDIR/host0.out" | sed -E 's/^\[[0-9]+\] //'
    shown=$n
}
[ "$PART_AT" = 0 ] && part_done=1
while [ "$left" -gt 0 ]; do
    for ((i = 0; i < NJOBS; i++)); do
        [ -n "${HOST_RC[i]:-}" ] && continue
        kill -0 "${HOST_PIDS[i]}" 2>/dev/null && continue
        wait "${HOST_PIDS[i]}"
        HOST_RC[i]=$?
        HOST_T[i]=$(elapsed)
        left=$((left - 1))
        if [ "${HOST_RC[i]}" != 0 ] && [ -z "$FIRST_FAIL" ]; then
            FIRST_FAIL=$i FAIL_T=$EPOCHREALTIME
        fi
    done
    show_host0
    [ "$left" -gt 0 ] || break
    if [ -n "$PART_HOST" ] && [ "$part_done" = 0 ] &&
        awk -v a="$EPOCHREALTIME" -v b="$T0" -v s="$PART_AT" 'BEGIN { exit !(a - b >= s) }'; then
        partition_now
        part_done=1
    fi
    if [ -n "$FIRST_FAIL" ] && [ "${#ended_by_us[@]}" = 0 ] &&
        awk -v a="$EPOCHREALTIME" -v b="$FAIL_T" -v g="$GRACE_S" 'BEGIN { exit !(a - b >= g) }'; then
        for ((i = 0; i < NJOBS; i++)); do
            [ -n "${HOST_RC[i]:-}" ] && continue
            kill -TERM "${HOST_PIDS[i]}" 2>/dev/null
            ended_by_us+=("$i")
        done
        warn "host $FIRST_FAIL failed; ended hosts ${ended_by_us[*]} after ${GRACE_S} s"
    fi
    sleep 0.2
done
TOTAL_S=$(elapsed)

# ---- report ---------------------------------------------------------------------

show_host0 all

# Link statistics: what each host sent, what tbf and the loss rule dropped.
link_stats() {
    local i rx tx qd nd
    for ((i = 0; i < HOSTS; i++)); do
        read -r rx tx < <(ip netns exec "${P}h$i" awk '/eth0:/ { sub(/.*eth0:/, ""); print $2, $10 }' /proc/net/dev)
        qd=$( (tc -s -n "${P}h$i" qdisc show dev eth0; tc -s -n "${P}sw" qdisc show dev "p$i") 2>/dev/null |
            awk '{ for (k = 1; k < NF; k++) if ($k == "(dropped") { sub(/,/, "", $(k + 1)); d += $(k + 1) } } END { print d + 0 }')
        nd=$(ip netns exec "${P}h$i" nft list chain inet libcoll_cluster ingress 2>/dev/null |
            awk '/numgen/ { for (k = 1; k < NF; k++) if ($k == "packets") print $(k + 1) }')
        # nstat -a: absolute counters of the namespace, not deltas since a last call
        read -r rs to < <(ip netns exec "${P}h$i" nstat -az TcpRetransSegs TcpExtTCPTimeouts 2>/dev/null |
            awk '$1 == "TcpRetransSegs" { r = $2 } $1 == "TcpExtTCPTimeouts" { t = $2 } END { print r + 0, t + 0 }')
        printf '#   host %d: sent %s packets, received %s; tbf dropped %s; TCP retransmitted %s segments, %s timeouts%s\n' \
            "$i" "${tx:-?}" "${rx:-?}" "${qd:-0}" "${rs:-?}" "${to:-?}" \
            "${nd:+; loss rule dropped $nd ($(awk -v d="$nd" -v r="${rx:-0}" 'BEGIN { printf "%.2f%%", r ? 100 * d / r : 0 }') of received)}"
    done
}
echo "# link statistics"
link_stats

# The summary: busbw (GB/s, 1e9 B/s) against the link rate in bytes/s.
WRONG=0
if [ -n "$CSV" ] && [ -s "$RUNDIR/host0.csv" ]; then
    echo "#"
    LIB_VERSION=$(awk -F, 'NR == 2 { print $2; exit }' "$RUNDIR/host0.csv")
    if [ "$RATE_BPS" = 0 ]; then
        echo "# $LIB${LIB_VERSION:+ $LIB_VERSION}: busbw (links unshaped: no percentage of a link rate)"
    else
        echo "# $LIB${LIB_VERSION:+ $LIB_VERSION}: busbw as % of the link rate ($RATE each way per host link = $(awk -v r="$RATE_BPS" 'BEGIN { printf "%.3f", r / 8e9 }') GB/s)"
    fi
    echo "# busbw (nccl-tests' definition) is the traffic on each rank's link under a"
    echo "# bandwidth-optimal algorithm: for all-reduce 2(n-1)/n of the data, as the"
    echo "# ring sends it. With one rank per host, 100% is the ceiling; TCP/IP headers"
    echo "# cap payload at ~95.6% (1448 of 1514 bytes per frame)."
    if [ "$RPH" -gt 1 ]; then
        echo "# With $RPH ranks per host, traffic between ranks of one host does not cross"
        echo "# the link (shared memory or lo, unshaped): algorithms with intra-host steps can"
        echo "# exceed 100%; the ring with host-contiguous ranks still crosses each link"
        echo "# once each way."
    fi
    if [ "$LIB" != libcoll ] || [[ " ${BENCH_ARGS[*]} " == *" -a 3 "* ]]; then
        echo "# '% of link' uses the benchmark's busbw, whose time is the mean per call of"
        echo "# the slowest rank (coll_perf's -a 3, as the peer benchmarks always time)."
        echo "# '% p50' uses the median iteration's slowest rank instead"
        echo "# (busbw * time / p50)."
    else
        echo "# '% of link' uses the benchmark's busbw, whose time is the mean over ranks"
        echo "# (nccl-tests' -a 1): ranks that finish early pull it down, so short calls"
        echo "# can show over 100%. '% p50' uses the median iteration's slowest rank"
        echo "# instead (busbw * time / p50)."
    fi
    awk -F, -v rate="$RATE_BPS" -v wrongfile="$RUNDIR/wrong" '
        function pct(bw) { return rate > 0 ? sprintf("%.1f%%", 100 * bw * 1e9 / (rate / 8)) : "-" }
        NR == 1 { for (k = 1; k <= NF; k++) col[$k] = k
                  printf "# %10s %-12s %-5s %11s %11s %10s %8s %6s\n", "size(B)", "collective",
                         "place", "time(us)", "busbw(GB/s)", "% of link", "% p50", "wrong"
                  next }
        { bw = $col["busbw"]; p50 = $col["p50_us"]
          printf "# %10s %-12s %-5s %11.1f %11.4f %10s %8s %6s\n", $col["size"], $col["collective"],
                 $col["placement"], $col["time_us"], bw, pct(bw),
                 (p50 > 0 ? pct(bw * $col["time_us"] / p50) : "-"), $col["wrong"]
          w += $col["wrong"] }
        END { print w + 0 > wrongfile }' "$RUNDIR/host0.csv" || warn "could not summarise $RUNDIR/host0.csv"
    WRONG=$(cat "$RUNDIR/wrong" 2>/dev/null || echo 0)
elif [ -n "$CSV" ]; then
    echo "# no results from host 0 (no CSV): no summary"
fi

# How the job ended, and why, in each host's own words.
EXIT_RC=0
for ((i = 0; i < NJOBS; i++)); do
    rc="${HOST_RC[i]}"
    [ "$rc" = 0 ] && continue
    [ "$EXIT_RC" = 0 ] && EXIT_RC=$rc
    case " ${ended_by_us[*]} " in
    *" $i "*) why="ended by $PROG after host $FIRST_FAIL failed (status $rc)" ;;
    *) if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then why="ran past --timeout $TIMEOUT s (status $rc)"
       else why="$LAUNCHER exited with status $rc"; fi ;;
    esac
    if [ "$LIB" = openmpi ]; then
        warn "mpirun in host 0 (ranks 0..$((NRANKS - 1)) on every host): $why at ${HOST_T[i]} s"
    else
        warn "host $i (ranks $((i * RPH))..$((i * RPH + RPH - 1))): $why at ${HOST_T[i]} s"
    fi
    grep -v '^\s*$' "$RUNDIR/host$i.err" | tail -n 4 | sed "s/^/cluster:   host $i: /" >&2
done
[ -n "$FIRST_FAIL" ] && EXIT_RC=${HOST_RC[FIRST_FAIL]}
if [ "$EXIT_RC" = 0 ] && [ "${WRONG:-0}" != 0 ]; then
    warn "$WRONG wrong results"
    EXIT_RC=1
fi
if [ "$EXIT_RC" = 0 ]; then
    say "job succeeded in $TOTAL_S s"
elif [ -n "$FIRST_FAIL" ]; then
    say "job FAILED after $TOTAL_S s: host $FIRST_FAIL failed first (exit status $EXIT_RC)${PART_HOST:+; host $PART_HOST was partitioned}"
else
    say "job FAILED after $TOTAL_S s: results were wrong (exit status $EXIT_RC)"
fi
exit "$EXIT_RC"
}
