#!/bin/bash
# plot.sh: PNG plots of a bench/compare.sh run, libcoll against each peer.
#
#   bench/plot.sh [--in DIR] [--out DIR]
#
# Reads DIR/medians.csv and DIR/env.txt from a compare.sh output directory
# (--in, default $BUILD/compare) and writes, into --out (default docs/img),
# for every collective, rank count, transport and placement in it:
#   <coll>_<transport>_np<N>_<out|in>_busbw.png   busbw (GB/s) against size,
#                                                 log x
#   <coll>_<transport>_np<N>_<out|in>_time.png    time per call (us) against
#                                                 size, log-log
# one line per library (medians over the repetitions, as in the table);
# and, when DIR/p2p_medians.csv has rows, p2p_latency_<transport>.png
# (one-way latency), p2p_bw_<transport>.png and p2p_bibw_<transport>.png
# (MB/s), log-log. `make plots` runs compare.sh with the sweep of docs/img
# and then this.
#
# Needs gnuplot (Debian: gnuplot-nox, installed by make plots). Exit
# status: 0, 1 when there was nothing to plot or gnuplot failed, 2 usage.
set -u

PROG=plot.sh
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
TOP="$(dirname "$HERE")"
IN="${BUILD:-build}/compare"
OUTDIR="$TOP/docs/img"
WORK=""

die() {
    echo "$PROG: $*" >&2
    exit 2
}

cleanup() {
    [ -n "$WORK" ] && rm -rf "$WORK"
}

while [ $# -gt 0 ]; do
    case "$1" in
    --in) [ $# -ge 2 ] || die "--in needs a directory"; IN="$2"; shift 2 ;;
    --out) [ $# -ge 2 ] || die "--out needs a directory"; OUTDIR="$2"; shift 2 ;;
    -h | --help) sed -n '2,/^set -u/p' "$0" | sed -e '/^set -u/d' -e 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown option '$1'" ;;
    esac
done
[ -f "$IN/medians.csv" ] || die "no $IN/medians.csv: run bench/compare.sh first"
command -v gnuplot >/dev/null || die "gnuplot not found (apt-get install gnuplot-nox)"
mkdir -p "$OUTDIR" || die "cannot create $OUTDIR"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/plot.XXXXXX")" || exit 1
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# Fixed colours, so that a library looks the same in every plot.
style_of() {
    case "$1" in
    libcoll) echo "lc rgb '#d62728' lw 3 pt 7 ps 1.1" ;;
    openmpi) echo "lc rgb '#1f77b4' lw 2 pt 5 ps 0.9" ;;
    mpich) echo "lc rgb '#2ca02c' lw 2 pt 9 ps 1.0" ;;
    gloo) echo "lc rgb '#ff7f0e' lw 2 pt 13 ps 1.0" ;;
    *) echo "lw 2" ;;
    esac
}

# "65536" -> "64K", for tic labels.
short_size() {
    awk -v b="$1" 'BEGIN {
        if (b >= 1048576 && b % 1048576 == 0) print b / 1048576 "M"
        else if (b >= 1024 && b % 1024 == 0) print b / 1024 "K"
        else print b
    }'
}

# set xtics ("8" 8, "32" 32, ...) from the sizes of a group, at most ~12.
xtics_for() {
    local sizes=("$@") step=1 i out=""
    [ ${#sizes[@]} -gt 12 ] && step=$(((${#sizes[@]} + 11) / 12))
    for ((i = 0; i < ${#sizes[@]}; i += step)); do
        out="$out${out:+, }\"$(short_size "${sizes[$i]}")\" ${sizes[$i]}"
    done
    echo "set xtics ($out)"
}

REPS_NOTE="$(sed -n 's/^# sweep: .*reps \([0-9]*\);.*/median of \1 runs/p' "$IN/env.txt" 2>/dev/null)"
STAMP="$(sed -n 's/^# libcoll comparison, \(.*\)$/\1/p' "$IN/env.txt" 2>/dev/null)"
HOSTNOTE="$(sed -n 's/^# cpu: \(.*\)$/\1/p' "$IN/env.txt" 2>/dev/null)"

# plot_one PNG TITLE YLABEL LOGY COLUMN XTICS DATAFILE:LABEL...
plot_one() {
    local png="$1" title="$2" ylabel="$3" logy="$4" col="$5" xtics="$6"
    local plots="" spec file lib label
    shift 6
    for spec in "$@"; do
        file="${spec%%:*}"
        label="${spec#*:}"
        lib="${label%% *}"
        plots="$plots${plots:+, }'$file' using 1:$col with linespoints $(style_of "$lib") title '$label'"
    done
    gnuplot <<EOF
set terminal pngcairo size 960,600 font 'Sans,11' noenhanced
set output '$png'
set title "$title\n${REPS_NOTE:+$REPS_NOTE, }$STAMP, $HOSTNOTE"
set logscale x 2
set offsets graph 0.02, graph 0.02, 0, 0
$( [ "$logy" = 1 ] && echo "set logscale y 10" )
$xtics
set xlabel 'message size (bytes)'
set ylabel '$ylabel'
set grid xtics ytics mytics
set key left top box opaque
set yrange [0:*]
$( [ "$logy" = 1 ] && echo "set yrange [*:*]" )
plot $plots
EOF
}

# One group = (collective, nranks, transport, placement) in medians.csv:
# library,version,transport,collective,nranks,placement,size,reps_ok,time_us,busbw,...
plot_collectives() {
    local groups g coll np tr pl lib ver f n=0 xt title place
    local -a specs sizes
    groups="$(awk -F, 'NR > 1 { print $4 "," $5 "," $3 "," $6 }' "$IN/medians.csv" | sort -u)"
    for g in $groups; do
        IFS=, read -r coll np tr pl <<<"$g"
        specs=()
        for lib in libcoll openmpi mpich gloo; do
            f="$WORK/${g//,/_}_$lib.dat"
            awk -F, -v c="$coll" -v n="$np" -v t="$tr" -v p="$pl" -v l="$lib" \
                '$1 == l && $4 == c && $5 == n && $3 == t && $6 == p { print $7, $9, $10 }' \
                "$IN/medians.csv" | sort -n >"$f"
            [ -s "$f" ] || continue
            ver="$(awk -F, -v l="$lib" '$1 == l { print $2; exit }' "$IN/medians.csv")"
            specs+=("$f:$lib $ver")
        done
        [ ${#specs[@]} -gt 0 ] || continue
        mapfile -t sizes < <(awk -F, -v c="$coll" -v n="$np" -v t="$tr" -v p="$pl" \
            'NR > 1 && $4 == c && $5 == n && $3 == t && $6 == p { print $7 }' \
            "$IN/medians.csv" | sort -un)
        xt="$(xtics_for "${sizes[@]}")"
        place=$([ "$pl" = in ] && echo in-place || echo out-of-place)
        title="$coll, $np ranks, $tr, $place, float sum"
        plot_one "$OUTDIR/${coll}_${tr}_np${np}_${pl}_busbw.png" "busbw: $title (higher is better)" \
            'busbw (GB/s)' 0 3 "$xt" "${specs[@]}" || return 1
        plot_one "$OUTDIR/${coll}_${tr}_np${np}_${pl}_time.png" "time per call: $title (lower is better)" \
            'time per call (us)' 1 2 "$xt" "${specs[@]}" || return 1
        echo "$OUTDIR/${coll}_${tr}_np${np}_${pl}_busbw.png"
        echo "$OUTDIR/${coll}_${tr}_np${np}_${pl}_time.png"
        n=$((n + 2))
    done
    [ "$n" -gt 0 ]
}

# p2p_medians.csv: library,version,transport,test,size,reps_ok,latency_us,p50_us,p99_us,bandwidth_MBps,wrong
# One plot per test: the latency test's one-way latency, the bw and bibw
# tests' bandwidth (p2p_perf writes one or the other), both log-log.
plot_p2p() {
    local f="$IN/p2p_medians.csv" g test tr lib d xt ver col ylabel what png
    local -a specs sizes
    [ -f "$f" ] || return 0
    for g in $(awk -F, 'NR > 1 { print $4 "," $3 }' "$f" | sort -u); do
        IFS=, read -r test tr <<<"$g"
        col=7 ylabel='one-way latency (us)' what='latency (lower is better)'
        [ "$test" != latency ] && col=10 ylabel='MB/s (1e6 B/s)' what='bandwidth (higher is better)'
        specs=()
        for lib in libcoll openmpi mpich gloo; do
            d="$WORK/p2p_${test}_${tr}_$lib.dat"
            awk -F, -v t="$test" -v r="$tr" -v l="$lib" -v c="$col" \
                '$1 == l && $4 == t && $3 == r && $c != "" { print $5, $c }' "$f" | sort -n >"$d"
            [ -s "$d" ] || continue
            ver="$(awk -F, -v l="$lib" '$1 == l { print $2; exit }' "$f")"
            specs+=("$d:$lib $ver")
        done
        [ ${#specs[@]} -gt 0 ] || continue
        mapfile -t sizes < <(awk -F, -v t="$test" -v r="$tr" 'NR > 1 && $4 == t && $3 == r { print $5 }' "$f" | sort -un)
        xt="$(xtics_for "${sizes[@]}")"
        png="$OUTDIR/p2p_${test}_${tr}.png"
        plot_one "$png" "p2p $test, 2 ranks, $tr: $what" "$ylabel" 1 2 "$xt" "${specs[@]}" || return 1
        echo "$png"
    done
}

plot_collectives || { echo "$PROG: nothing plotted from $IN/medians.csv" >&2; exit 1; }
plot_p2p || exit 1
