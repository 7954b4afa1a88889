#!/bin/bash
# compare.sh: libcoll against Open MPI, MPICH and Gloo on this machine, in
# the same run, the same sweep, the same transport class, one table.
#
#   bench/compare.sh [--np 2,4] [--coll all_reduce[,all_gather,...|all|p2p]]
#                    [--transport tcp|shm|any] [-b 16] [-e 64M] [-f 4] [--reps 3]
#                    [--libs libcoll,openmpi,mpich,gloo] [--inplace]
#                    [-n 20] [-w 5] [--p2p-sizes 1:4M] [--timeout 300]
#                    [--bind auto|core|none] [--mem-alloc]
#                    [--out DIR] [--build DIR] [--verdict] [--report]
#
# Default sweep (make compare): all_reduce, float sum, out of place, over
# TCP on loopback, 2 and 4 ranks, 16 B to 64 MiB by x4 (12 sizes), 3
# repetitions; every library makes 5 warm-up calls at the largest and the
# smallest size, then per size 1 untimed and 20 timed calls. About 3
# minutes on the 2-core development machine; a run that hangs is cut at
# --timeout seconds (300) and shows as "timeout".
#
# Collectives: all_reduce all_gather broadcast reduce reduce_scatter
# alltoall (or all). Point-to-point, OSU style: p2p_latency p2p_bw p2p_bibw
# (or p2p): always 2 ranks, sizes --p2p-sizes doubling, OSU's iteration
# counts (libcoll's p2p_latency/p2p_bw/p2p_bibw binaries and the peers'
# -C p2p_* modes); latency in us, bandwidth in MB/s (1e6 B/s).
#
# How it measures:
#   - Every library runs the same sweep through a benchmark with the same
#     options, checks, timing and CSV: libcoll's own coll_perf binaries
#     (all_reduce_perf, ... with -a 3: time = mean per call, max over
#     ranks) and our peer benchmarks bench/peers/mpi_perf.c (built for
#     Open MPI and for MPICH) and bench/peers/gloo_perf.cc, built into
#     $BUILD/peers/ by bench/peers/Makefile.
#   - Alternation: for each rank count and each repetition, every library
#     runs once in turn (libcoll, openmpi, mpich, gloo, libcoll, ...), so a
#     slow drift of the machine hits all of them alike. Each run is bounded
#     by `timeout` (--timeout seconds) and is a fresh launch.
#   - Medians: per (library, ranks, collective, placement, size), the
#     median over the repetitions of the time per call (busbw follows
#     from it), p50 and p99 likewise; wrong = summed over repetitions.
#   - Placement, the same for every library (--bind): core
#     binds rank i to the i-th CPU this script may use, round robin when
#     there are more ranks than CPUs (libcoll: collrun --bind-to core; Open
#     MPI --map-by core:OVERSUBSCRIBE --bind-to core:overload-allowed;
#     MPICH -bind-to core; Gloo: taskset); none leaves placement to the
#     kernel (collrun and Open MPI --bind-to none; MPICH and Gloo unbound);
#     auto (default) is core from 2 ranks up to as many as those CPUs and
#     none otherwise, as collrun's own default.
#   - Transport class, forced on every side:
#       tcp  libcoll -T tcp; Open MPI --mca pml ob1 --mca btl tcp,self
#            --mca btl_tcp_if_include lo; MPICH MPIR_CVAR_NOLOCAL=1
#            UCX_TLS=tcp,self UCX_NET_DEVICES=lo; Gloo tcp on 127.0.0.1
#       ofi-tcp, ofi-shm  libfabric's tcp or shm provider: libcoll -T ofi
#            with COLL_OFI_PROVIDER; Open MPI --mca pml cm --mca mtl ofi
#            with that provider (tcp only: n/a over shm, where its MTL
#            fails to start); MPICH (Debian's is built for UCX) and Gloo
#            have no libfabric path: n/a
#       shm  libcoll -T shm; Open MPI --mca pml ob1 --mca btl vader,self;
#            MPICH's defaults (shared memory within a node); Gloo has none
#       any  everything allowed: each library as a user gets it on one
#            host, with its defaults (libcoll auto: shared memory; Open MPI
#            and MPICH: their defaults, shared memory within a node);
#            Gloo over TCP on 127.0.0.1, its only transport
#   - The table: time per call in us below 64 KiB, busbw in GB/s from
#     64 KiB; best peer = the fastest peer with correct results; ratio =
#     best peer's time / libcoll's time, so > 1 means libcoll is faster.
#     A cell that is not a number says why: fail, timeout, skipped (the
#     reason is printed under the table), n/a (the library has no such
#     call); "*" = fewer repetitions than asked, "!" = wrong results.
#
# Output (--out, default $BUILD/compare/): env.txt (versions, kernel,
# CPU, command, memcpy and fp32 sum bandwidth measured at the start),
# raw/*.csv and raw/*.log (one per run), runs.csv (status of every run),
# medians.csv, summary.csv (the table, machine-readable),
# table.txt (what is printed), verdict.txt (one line per rank count).
#   --mem-alloc libcoll's buffers come from coll_mem_alloc (its benchmarks'
#               -R 1), which ranks on one host read directly; the peers'
#               from their usual allocation. Not like for like: a program
#               must allocate with it to get its speed (docs/api.md)
#   --verdict   print only the verdict line(s), no progress, e.g. for
#               make demo: bench/compare.sh --np 4 -e 16M --reps 1 --verdict
#   --report    run nothing: rebuild the tables of the run in --out from
#               its CSVs (its sweep is read from --out/sweep.env)
#
# Exit status: 0 when the comparison ran (even if a peer failed or gave
# wrong results: that shows in the table); 1 when a libcoll run failed,
# timed out or gave a wrong result; 2 on a usage error; 130/143 when
# interrupted (every child is stopped).
set -u

PROG=compare.sh
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
TOP="$(dirname "$HERE")"
ALL_LIBS="libcoll,openmpi,mpich,gloo"
ALL_COLLS="all_reduce all_gather broadcast reduce reduce_scatter alltoall"
ALL_P2P="p2p_latency p2p_bw p2p_bibw"
PEER_PKGS="openmpi-bin libopenmpi-dev mpich libmpich-dev libgloo-dev g++"

NPS="2,4"
COLLS="all_reduce"
P2P_SIZES="1:4M"
TRANSPORT="tcp"
MINB="16"
MAXB="64M"
FACTOR="4"
REPS=3
LIBS="$ALL_LIBS"
INPLACE=0
BIND=auto
ITERS=20
WARMUP=5
RUN_TIMEOUT=300
BUILD="${BUILD:-build}"
OUT=""
VERDICT_ONLY=0
REPORT_ONLY=0
MEM_ALLOC=0

CHILDREN=()      # pids of the timeouts running now (killed on a signal)
GLOO_STORE=""    # the running Gloo job's rendezvous directory

usage() {
    sed -n '2,/^set -u/p' "$0" | sed -e '/^set -u/d' -e 's/^# \{0,1\}//'
    exit "${1:-2}"
}

die() {
    echo "$PROG: $*" >&2
    exit 2
}

say() { # progress, on stderr so that stdout is only the table; quiet for --verdict
    [ "$VERDICT_ONLY" -eq 1 ] || echo "[$(date +%H:%M:%S)] $*" >&2
}

parse_args() {
    local opt
    while [ $# -gt 0 ]; do
        opt="$1"
        case "$opt" in
        --inplace) INPLACE=1; shift; continue ;;
        --verdict) VERDICT_ONLY=1; shift; continue ;;
        --report) REPORT_ONLY=1; shift; continue ;;
        --mem-alloc) MEM_ALLOC=1; shift; continue ;;
        -h | --help) usage 0 ;;
        esac
        [ $# -ge 2 ] || die "unknown option '$opt' or it lacks its value (--help lists them)"
        case "$opt" in
        --np) NPS="$2" ;;
        --coll) COLLS="${2//,/ }" ;;
        --transport) TRANSPORT="$2" ;;
        -b) MINB="$2" ;;
        -e) MAXB="$2" ;;
        -f) FACTOR="$2" ;;
        -n) ITERS="$2" ;;
        -w) WARMUP="$2" ;;
        --reps) REPS="$2" ;;
        --libs) LIBS="$2" ;;
        --timeout) RUN_TIMEOUT="$2" ;;
        --bind) BIND="$2" ;;
        --p2p-sizes) P2P_SIZES="$2" ;;
        --out) OUT="$2" ;;
        --build) BUILD="$2" ;;
        *) die "unknown option '$opt' (--help lists them)" ;;
        esac
        shift 2
    done
    local c l words
    COLLS=" $COLLS "
    COLLS="${COLLS/ all / $ALL_COLLS }"
    COLLS="${COLLS/ p2p / $ALL_P2P }"
    read -r -a words <<<"$COLLS"
    COLLS="${words[*]}"
    case "$P2P_SIZES" in *:*) ;; *) die "--p2p-sizes is MIN:MAX, e.g. 1:4M" ;; esac
    case "$TRANSPORT" in
    tcp | shm | any | ofi-tcp | ofi-shm) ;;
    *) die "--transport is tcp, shm, any, ofi-tcp or ofi-shm" ;;
    esac
    case "$REPS" in '' | *[!0-9]* | 0) die "--reps takes a positive number" ;; esac
    case "$BIND" in auto | core | none) ;; *) die "--bind is auto, core or none" ;; esac
    case "$RUN_TIMEOUT" in '' | *[!0-9]*) die "--timeout takes whole seconds" ;; esac
    for c in $COLLS; do
        case " $ALL_COLLS $ALL_P2P " in *" $c "*) ;; *) die "unknown collective '$c'" ;; esac
    done
    for l in ${LIBS//,/ }; do
        case ",$ALL_LIBS," in *",$l,"*) ;; *) die "unknown library '$l'" ;; esac
    done
    NPS="${NPS//,/ }"
    OUT="${OUT:-$BUILD/compare}"
    RAW="$OUT/raw"
}

# ---- children and signals ------------------------------------------------------

# Stop whatever runs now: `timeout` puts its command in a process group of
# its own and passes our TERM on to the whole group (mpirun and its ranks,
# or one Gloo rank).
stop_children() {
    local p
    for p in "${CHILDREN[@]}"; do
        kill -TERM "$p" 2>/dev/null
    done
    for p in "${CHILDREN[@]}"; do
        wait "$p" 2>/dev/null
    done
    CHILDREN=()
    [ -n "$GLOO_STORE" ] && rm -rf "$GLOO_STORE"
    GLOO_STORE=""
}

on_signal() {
    trap - INT TERM HUP
    echo "$PROG: interrupted; stopping the running job" >&2
    stop_children
    exit "$1"
}

# bounded LOG CMD...: run CMD under timeout, output to LOG; its exit status.
bounded() {
    local log="$1" rc
    shift
    timeout -k 10 "$RUN_TIMEOUT" "$@" </dev/null >"$log" 2>&1 &
    CHILDREN=($!)
    wait "$!"
    rc=$?
    CHILDREN=()
    return "$rc"
}

# The CPUs this script may use, one per line (Cpus_allowed_list expanded).
own_cpus() {
    local range
    for range in $(sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' /proc/self/status | tr , ' '); do
        seq "${range%-*}" "${range#*-}"
    done
}

# placement NP: core or none, what --bind means for a run of NP ranks.
placement() {
    local ncpus
    [ "$BIND" = auto ] || { echo "$BIND"; return; }
    ncpus=$(own_cpus | wc -l)
    if [ "$1" -ge 2 ] && [ "$1" -le "$ncpus" ]; then echo core; else echo none; fi
}

# gloo_job NP LOG ARGS...: Gloo has no launcher, so start NP gloo_perf
# processes that meet in a fresh FileStore directory. When one fails, the
# others are stopped at once rather than left waiting for Gloo's timeout.
# Placed on cores, rank r runs on the (r mod CPUs)-th CPU, as collrun's.
gloo_job() {
    local np="$1" log="$2" r rc=0 stop=0 st p
    local -a left still cpus pin=()
    shift 2
    mapfile -t cpus < <(own_cpus)
    [ "$(placement "$np")" = core ] || cpus=()
    GLOO_STORE="$(mktemp -d "${TMPDIR:-/tmp}/compare-gloo.XXXXXX")" || return 1
    CHILDREN=()
    for ((r = 0; r < np; r++)); do
        [ ${#cpus[@]} -gt 0 ] && pin=(taskset -c "${cpus[r % ${#cpus[@]}]}")
        timeout -k 10 "$RUN_TIMEOUT" "${pin[@]}" "$BUILD/peers/gloo_perf" --rank "$r" --nranks "$np" \
            --store "$GLOO_STORE" "$@" </dev/null >"$log.rank$r" 2>&1 &
        CHILDREN+=($!)
    done
    # Poll rather than `wait -n -p`: when two ranks end together, bash may
    # have collected both already, and wait -n then returns 127 without
    # naming a pid. `wait PID` still gives an ended rank's status.
    left=("${CHILDREN[@]}")
    while [ ${#left[@]} -gt 0 ]; do
        still=()
        for p in "${left[@]}"; do
            if kill -0 "$p" 2>/dev/null; then
                still+=("$p")
                continue
            fi
            wait "$p"
            st=$?
            [ "$st" -ne 0 ] && [ "$rc" -eq 0 ] && rc=$st && stop=1
        done
        left=("${still[@]}")
        # only ranks still running: a collected one's pid may be reused
        if [ "$stop" -eq 1 ]; then
            for p in "${left[@]}"; do kill -TERM "$p" 2>/dev/null; done
            stop=0
        fi
        [ ${#left[@]} -gt 0 ] && sleep 0.02
    done
    for ((r = 0; r < np; r++)); do # rank 0's table first, then the others' errors
        if [ "$r" -eq 0 ]; then cat "$log.rank0"; else sed "s/^/[rank $r] /" "$log.rank$r"; fi
        rm -f "$log.rank$r"
    done >"$log"
    CHILDREN=()
    rm -rf "$GLOO_STORE"
    GLOO_STORE=""
    return "$rc"
}

# ---- what can run ----------------------------------------------------------------

LIBCOLL_VERSION=""

is_p2p() { [[ "$1" == p2p_* ]]; }

# all_reduce -> all_reduce_perf; p2p_latency -> p2p_latency (OSU names).
libcoll_bin() {
    if is_p2p "$1"; then echo "$1"; else echo "${1}_perf"; fi
}

# Why LIB cannot run COLL here ("" when it can); "n/a: ..." when the
# library has no such transport at all.
why_not() {
    local lib="$1" coll="$2"
    case "$lib" in
    libcoll)
        [ -x "$BUILD/bin/collrun" ] || { echo "skipped: $BUILD/bin/collrun not built"; return; }
        [ -x "$BUILD/bin/$(libcoll_bin "$coll")" ] ||
            { echo "skipped: $BUILD/bin/$(libcoll_bin "$coll") not built"; return; }
        if [ "$TRANSPORT" = shm ] &&
            ! "$BUILD/bin/collinfo" 2>/dev/null | grep -q '^transports:.*\bshm\b'; then
            echo "skipped: libcoll has no shm transport yet (collinfo: $("$BUILD/bin/collinfo" 2>/dev/null | grep '^transports:'))"
        fi
        ;;
    openmpi)
        # Tried 2026-11-22: Open MPI 4.1.4's ofi MTL fails its init over
        # libfabric 1.17's shm provider ("PML cm cannot be selected") and its
        # ofi BTL crashes (SIGSEGV).
        [ "$TRANSPORT" = ofi-shm ] &&
            { echo "n/a: Open MPI 4.1 runs over libfabric's tcp provider but not its shm provider"; return; }
        command -v mpirun.openmpi >/dev/null || { echo "skipped: mpirun.openmpi not found (openmpi-bin)"; return; }
        [ -x "$BUILD/peers/mpi_perf.openmpi" ] ||
            echo "skipped: $BUILD/peers/mpi_perf.openmpi not built (libopenmpi-dev)"
        ;;
    mpich)
        case "$TRANSPORT" in ofi-*)
            echo "n/a: MPICH here is built for UCX (ch4:ucx) and not for libfabric"; return ;;
        esac
        command -v mpirun.mpich >/dev/null || { echo "skipped: mpirun.mpich not found (mpich)"; return; }
        [ -x "$BUILD/peers/mpi_perf.mpich" ] ||
            echo "skipped: $BUILD/peers/mpi_perf.mpich not built (libmpich-dev)"
        ;;
    gloo)
        [ "$TRANSPORT" = shm ] && { echo "n/a: Gloo has no shared-memory transport"; return; }
        case "$TRANSPORT" in ofi-*) echo "n/a: Gloo has no libfabric transport"; return ;; esac
        [ -x "$BUILD/peers/gloo_perf" ] ||
            echo "skipped: $BUILD/peers/gloo_perf not built (libgloo-dev)"
        ;;
    esac
}

prepare() {
    : >"$OUT/build.log"
    say "packages: $PEER_PKGS"
    # shellcheck disable=SC2086 # one word per package
    "$TOP/scripts/deps.sh" $PEER_PKGS >>"$OUT/build.log" 2>&1 ||
        say "some peer packages could not be installed: those libraries are skipped"
    say "building libcoll and its benchmarks into $BUILD"
    make -C "$TOP" --no-print-directory BUILD="$BUILD" all >>"$OUT/build.log" 2>&1 ||
        say "libcoll build failed (see $OUT/build.log)"
    say "building the peer benchmarks into $BUILD/peers"
    make -C "$TOP" --no-print-directory -f bench/peers/Makefile BUILD="$BUILD" \
        >>"$OUT/build.log" 2>&1 || say "peer build failed (see $OUT/build.log)"
    grep '^skipped:' "$OUT/build.log" | while read -r line; do say "$line"; done
    LIBCOLL_VERSION="$("$BUILD/bin/collinfo" 2>/dev/null | head -1)"
    if [ "$TRANSPORT" = shm ] && [[ ",$LIBS," == *,libcoll,* ]]; then
        local w
        w="$(why_not libcoll all_reduce)"
        [ -n "$w" ] && say "libcoll: $w; the peers still run"
    fi
}

# This machine's own limits for large messages, measured now (beside the
# runs, not from a past figure): memcpy and the fp32 sum kernel c = a + b
# at 64 MiB, beyond the caches, as GB/s of output.
machine_limits() {
    local rb="$BUILD/bin/reduce_bench"
    [ -x "$rb" ] || { echo "not measured ($rb not built)"; return; }
    "$rb" -r 5 -m 64 2>/dev/null | awk '$1 == "64.00" && $2 == "MiB" {
        printf "memcpy %s GB/s, fp32 sum c = a + b %s GB/s, a += b %s GB/s (64 MiB, reduce_bench)", $3, $4, $6
        found = 1 } END { if (!found) printf "not measured (reduce_bench printed no 64 MiB row)" }'
}

record_env() {
    {
        echo "# libcoll comparison, $(date -u +%Y-%m-%dT%H:%M:%SZ)"
        echo "# command: $PROG $ORIG_ARGS"
        echo "# host: $(uname -n), kernel $(uname -r)"
        echo "# cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores"
        echo "# load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
        echo "# libcoll: ${LIBCOLL_VERSION:-not built}"
        echo "# limits: $(machine_limits)"
        echo "# packages: $(dpkg-query -W -f='${Package} ${Version}; ' openmpi-bin mpich libucx0 libgloo0 gcc 2>/dev/null)"
        echo "# sweep: np $NPS; $COLLS; transport $TRANSPORT; -b $MINB -e $MAXB -f $FACTOR; p2p $P2P_SIZES;" \
            "-n $ITERS -w $WARMUP; reps $REPS; timeout ${RUN_TIMEOUT} s/run; bind $BIND;" \
            "libcoll's buffers from coll_mem_alloc: $([ "$MEM_ALLOC" -eq 1 ] && echo yes || echo no)"
    } >"$OUT/env.txt"
    # what --report needs to rebuild this run's tables
    printf 'NPS=%q COLLS=%q LIBS=%q REPS=%q INPLACE=%q TRANSPORT=%q\n' \
        "$NPS" "$COLLS" "$LIBS" "$REPS" "$INPLACE" "$TRANSPORT" >"$OUT/sweep.env"
}

# ---- one run ------------------------------------------------------------------------

# Options every benchmark gets.
common_args() {
    printf '%s\n' -b "$MINB" -e "$MAXB" -f "$FACTOR" -n "$ITERS" -w "$WARMUP" -c 1 \
        -d float -o sum -T "$TRANSPORT"
}

peer_args() { # COLL CSV
    if is_p2p "$1"; then # OSU's iteration counts, as libcoll's p2p_perf
        printf '%s\n' -b "${P2P_SIZES%%:*}" -e "${P2P_SIZES#*:}" -f 2 -c 1 -T "$TRANSPORT" \
            -C "$1" --csv "$2"
        return
    fi
    common_args
    printf '%s\n' -C "$1" --csv "$2" --placement "$PLACEMENT"
}

libcoll_args() { # COLL CSV
    if is_p2p "$1"; then
        printf '%s\n' -m "$P2P_SIZES" -c -T "$TRANSPORT" --csv "$2" | libcoll_transport
        return
    fi
    common_args | libcoll_transport
    printf '%s\n' -a 3 --csv "$2" # -a 3: time = max over ranks, as the peers
    [ "$MEM_ALLOC" -eq 0 ] || printf '%s\n' -R 1
}

# With --transport any libcoll chooses per peer as it does by default: drop
# the "-T any" that the peers take as a label (one argument per line). The
# ofi-* classes are libcoll's -T ofi (the provider is set in run_one).
libcoll_transport() {
    if [ "${TRANSPORT#ofi-}" != "$TRANSPORT" ]; then
        sed 's/^ofi-.*/ofi/'
    elif [ "$TRANSPORT" = any ]; then
        awk 'prev == "-T" && $0 == "any" { prev = ""; next }
             { if (prev != "") print prev; prev = $0 }
             END { if (prev != "" && prev != "-T") print prev }'
    else
        cat
    fi
}

# The line of a failed run's log that best says why.
failure_line() {
    local line
    line="$(grep -v '^#' "$1" 2>/dev/null | grep -iE 'error|fail|abort|timeout|wrong|exception|killed' | head -1)"
    [ -n "$line" ] || line="$(grep -v '^[[:space:]]*$' "$1" 2>/dev/null | tail -1)"
    printf '%s' "$line" | cut -c1-160
}

# "16777216 B in: 18079 wrong" for every row of CSV with wrong > 0.
wrong_rows() {
    [ -f "$1" ] || return 0
    awk -F, 'NR > 1 && $NF + 0 > 0 {
        printf "%s%s B%s: %s wrong", sep, $(NF == 17 ? 6 : 5), NF == 17 ? " " $11 : "", $NF
        sep = "; " }' "$1"
}

run_one() { # LIB COLL NP REP
    local lib="$1" coll="$2" np="$3" rep="$4"
    local tag="${lib}_${coll}_${TRANSPORT}_np${np}_r${rep}"
    local csv="$RAW/$tag.csv" log="$RAW/$tag.log"
    local why status rc t0 wall note="" place
    local -a args

    place=$(placement "$np")

    why="$(why_not "$lib" "$coll")"
    if [ -n "$why" ]; then
        status="${why%%:*}"
        note="${why#*: }"
        note="${note//[\",]/;}" # one CSV field
        echo "$lib,$coll,$TRANSPORT,$np,$rep,$status,,0,\"$note\"" >>"$OUT/runs.csv"
        return
    fi
    rm -f "$csv"
    t0=$(date +%s.%N)
    case "$lib" in
    libcoll)
        mapfile -t args < <(libcoll_args "$coll" "$csv")
        local -a ofi=()
        [ "${TRANSPORT#ofi-}" != "$TRANSPORT" ] && ofi=(COLL_OFI_PROVIDER="${TRANSPORT#ofi-}")
        bounded "$log" env "${ofi[@]}" "$BUILD/bin/collrun" -n "$np" --bind-to "$place" \
            "$BUILD/bin/$(libcoll_bin "$coll")" "${args[@]}"
        ;;
    openmpi)
        mapfile -t args < <(peer_args "$coll" "$csv")
        # shellcheck disable=SC2054 # tcp,self and vader,self are one MCA value each
        local -a mca=(--mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include lo)
        # shellcheck disable=SC2054
        [ "$TRANSPORT" = shm ] && mca=(--mca pml ob1 --mca btl vader,self)
        [ "$TRANSPORT" = any ] && mca=()
        case "$TRANSPORT" in ofi-*)
            mca=(--mca pml cm --mca mtl ofi --mca mtl_ofi_provider_include "${TRANSPORT#ofi-}"
                -x FI_PROVIDER="${TRANSPORT#ofi-}") ;;
        esac
        local -a bind=(--bind-to none)
        [ "$place" = core ] && bind=(--map-by core:OVERSUBSCRIBE --bind-to core:overload-allowed)
        bounded "$log" mpirun.openmpi --allow-run-as-root --oversubscribe "${bind[@]}" \
            -np "$np" "${mca[@]}" "$BUILD/peers/mpi_perf.openmpi" "${args[@]}"
        ;;
    mpich)
        mapfile -t args < <(peer_args "$coll" "$csv")
        # shellcheck disable=SC2054 # tcp,self is one UCX value
        local -a envs=(MPIR_CVAR_NOLOCAL=1 UCX_TLS=tcp,self UCX_NET_DEVICES=lo)
        [ "$TRANSPORT" = tcp ] || envs=()
        local -a bind=()
        [ "$place" = core ] && bind=(-bind-to core)
        bounded "$log" env "${envs[@]}" mpirun.mpich "${bind[@]}" -np "$np" \
            "$BUILD/peers/mpi_perf.mpich" "${args[@]}"
        ;;
    gloo)
        mapfile -t args < <(peer_args "$coll" "$csv")
        gloo_job "$np" "$log" "${args[@]}"
        ;;
    esac
    rc=$?
    # libcoll ran without -T (its own choice, "auto" in its CSV): label its
    # rows with the class, as the peers' are, so that tables and plots
    # put them side by side
    [ "$lib" = libcoll ] && [ "$TRANSPORT" = any ] && [ -f "$csv" ] &&
        sed -i 's/^\(libcoll,[^,]*,\)auto,/\1any,/' "$csv"
    [ "$lib" = libcoll ] && [ "${TRANSPORT#ofi-}" != "$TRANSPORT" ] && [ -f "$csv" ] &&
        sed -i "s/^\(libcoll,[^,]*,\)ofi,/\1$TRANSPORT,/" "$csv"
    wall=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
    case "$rc" in
    0) status=ok ;;
    124 | 137) status=timeout; note="no end after ${RUN_TIMEOUT} s" ;;
    *) status=fail; note="exit $rc: $(failure_line "$log")" ;;
    esac
    # MPICH 4.0.2 over UCX sometimes never leaves MPI_Finalize (shared/peers/
    # RESULTS.md, observation 6); mpi_perf arms its watchdog only after a
    # barrier that follows rank 0's last row, so the results are complete.
    if [ "$status" = fail ] && grep -q 'MPI_Finalize did not return' "$log"; then
        status=ok
        note="MPI_Finalize hung after the last row (exit $rc); results complete"
    fi
    local bad
    bad="$(wrong_rows "$csv")"
    [ -n "$bad" ] && note="wrong results ($bad)${note:+; $note}"
    note="${note//[\",]/;}"
    echo "$lib,$coll,$TRANSPORT,$np,$rep,$status,$rc,$wall,\"$note\"" >>"$OUT/runs.csv"
    say "np $np rep $rep/$REPS $lib $coll: $status ($wall s)${note:+: $note}"
}

# The rank counts to run and, for each, its collectives: every --np gets
# the collectives; the p2p tests join the 2-rank pass (or make one).
plan() {
    local np colls="" p2p="" c
    for c in $COLLS; do
        if is_p2p "$c"; then p2p="$p2p $c"; else colls="$colls $c"; fi
    done
    for np in $NPS; do
        if [ "$np" = 2 ]; then echo "$np$colls$p2p"; p2p=""; else [ -n "$colls" ] && echo "$np$colls"; fi
    done
    [ -n "$p2p" ] && echo "2$p2p"
}

run_all() {
    local line np rep lib coll
    local -a jobs
    : >"$OUT/runs.csv"
    rm -f "$RAW"/*.csv "$RAW"/*.log
    while read -r line; do
        read -r -a jobs <<<"$line"
        np="${jobs[0]}"
        for ((rep = 1; rep <= REPS; rep++)); do
            for lib in ${LIBS//,/ }; do
                for coll in "${jobs[@]:1}"; do
                    run_one "$lib" "$coll" "$np" "$rep"
                done
            done
        done
    done < <(plan)
}

# ---- medians, table, verdict ------------------------------------------------------------

# medians.csv: one row per (library, collective, ranks, placement, size);
# p2p_medians.csv: one per (library, test, size). The library is the
# run's (from the file name), whatever the binary calls itself.
merge() {
    local f
    {
        echo "library,version,transport,collective,nranks,placement,size,reps_ok,time_us,busbw,p50_us,p99_us,wrong"
        for f in "$RAW"/*.csv; do
            [ -e "$f" ] || continue
            case "$f" in *_p2p_*) continue ;; esac
            awk -F, -v lib="$(basename "$f" | cut -d_ -f1)" \
                '$1 != "library" && NF >= 17 { $1 = lib; print }' OFS=, "$f"
        done | awk -F, -v OFS=, -f "$HERE/compare_merge.awk" | sort -t, -k4,4 -k5,5n -k6,6r -k7,7n -k1,1
    } >"$OUT/medians.csv"
    {
        echo "library,version,transport,test,size,reps_ok,latency_us,p50_us,p99_us,bandwidth_MBps,wrong"
        for f in "$RAW"/*_p2p_*.csv; do
            [ -e "$f" ] || continue
            awk -F, -v lib="$(basename "$f" | cut -d_ -f1)" \
                '$1 != "library" && NF >= 10 { $1 = lib; print }' OFS=, "$f"
        done | awk -F, -v OFS=, -v p2p=1 -f "$HERE/compare_merge.awk" | sort -t, -k4,4 -k5,5n -k1,1
    } >"$OUT/p2p_medians.csv"
}

report() {
    merge
    awk -F, -v libs="$LIBS" -v nps="$NPS" -v colls="$COLLS" -v reps="$REPS" \
        -v inplace="$INPLACE" -v transport="$TRANSPORT" -v out="$OUT" \
        -f "$HERE/compare_table.awk" "$OUT/runs.csv" "$OUT/medians.csv" "$OUT/p2p_medians.csv"
    if [ "$VERDICT_ONLY" -eq 1 ]; then
        cat "$OUT/verdict.txt"
    else
        sed -n '1,8p' "$OUT/env.txt"
        echo
        cat "$OUT/table.txt"
        echo
        cat "$OUT/verdict.txt"
        echo "(raw CSVs, medians.csv, summary.csv: $OUT)"
    fi
}

# 1 when a libcoll run failed or gave a wrong result. A peer's failure
# or wrong result is the peer's: it shows in the table, not in our status.
verdict_status() {
    awk -F, 'FNR > 1 && $1 == "libcoll" && $NF + 0 > 0 { bad = 1 } END { exit bad }' \
        "$OUT/medians.csv" "$OUT/p2p_medians.csv" || return 1
    awk -F, '$1 == "libcoll" && ($6 == "fail" || $6 == "timeout") { bad = 1 } END { exit bad }' \
        "$OUT/runs.csv" || return 1
    return 0
}

main() {
    ORIG_ARGS="$*"
    parse_args "$@"
    if [ "$REPORT_ONLY" -eq 1 ]; then
        [ -f "$OUT/runs.csv" ] || die "--report: no runs.csv in $OUT"
        # the run's own sweep, whatever this command line says
        # shellcheck disable=SC1091 # written by record_env
        [ -f "$OUT/sweep.env" ] && . "$OUT/sweep.env"
        report
        verdict_status
        exit
    fi
    PLACEMENT=out
    [ "$INPLACE" -eq 1 ] && PLACEMENT=both
    mkdir -p "$RAW" || die "cannot create $RAW"
    trap 'on_signal 130' INT
    trap 'on_signal 143' TERM
    trap 'on_signal 129' HUP
    prepare
    record_env
    run_all
    report
    verdict_status
}

main "$@"; exit  # one line: an edit of this file during a run cannot run stray text
