# compare_table.awk: the side-by-side table of bench/compare.sh.
#
#   awk -F, -v libs=libcoll,openmpi,mpich,gloo -v nps="2 4" -v colls=all_reduce
#       -v reps=3 -v inplace=0 -v transport=tcp -v out=DIR
#       -f compare_table.awk runs.csv medians.csv p2p_medians.csv
#
# Writes DIR/table.txt (for people), DIR/summary.csv (the same cells for
# programs: tests, plots, make demo) and DIR/verdict.txt (one line per
# collective, rank count and placement).
#
# A row per size: below 64 KiB the time per call in us (what matters for
# small messages), from 64 KiB busbw in GB/s. The best peer is the peer
# with the lowest median time and no wrong element; ratio = best peer's
# time / libcoll's time, the same as libcoll's busbw / the best busbw:
# > 1 means libcoll is faster. The p2p tests (2 ranks) show the one-way
# latency in us (p2p_latency) or the bandwidth in MB/s (p2p_bw, p2p_bibw);
# their ratio is best peer latency / libcoll's, or libcoll's bandwidth /
# the best peer's.

function human(b) {
    if (b >= 1048576 && b % 1048576 == 0) return (b / 1048576) " MiB"
    if (b >= 1024 && b % 1024 == 0) return (b / 1024) " KiB"
    return b " B"
}

function fmt_time(v) {
    return sprintf(v < 10 ? "%.2f" : v < 1000 ? "%.1f" : "%.0f", v)
}

# Why a library has no number for this (collective, ranks): the statuses
# of its runs. A run that completed without the row means the library
# has no such call (e.g. Gloo's in-place alltoall); otherwise the worst
# status of its runs.
function why(lib, coll, np,    k) {
    k = lib SUBSEP coll SUBSEP np
    if ((k SUBSEP "skipped") in nstat) return "skipped"
    if ((k SUBSEP "n/a") in nstat) return "n/a"
    if ((k SUBSEP "ok") in nstat) return "n/a" # a complete run had no such row
    if ((k SUBSEP "timeout") in nstat) return "timeout"
    if ((k SUBSEP "fail") in nstat) return "fail"
    return "not run"
}

# Sort the sizes s[1..n] numerically (insertion sort, plain awk).
function sort_sizes(s, n,    i, j, x) {
    for (i = 2; i <= n; i++) {
        x = s[i] + 0
        for (j = i - 1; j >= 1 && s[j] + 0 > x; j--) s[j + 1] = s[j]
        s[j + 1] = x
    }
}

FILENAME == ARGV[1] { # runs.csv: library,collective,transport,nranks,rep,status,rc,wall_s,"note"
    k = $1 SUBSEP $2 SUBSEP $4
    nstat[k SUBSEP $6]++
    if ($6 == "skipped" || $6 == "n/a") {
        note = $9
        gsub(/"/, "", note)
        reason[$1] = $6 ": " $1 ": " note
    }
    next
}

FNR == 1 { p2p = $4 == "test"; next } # the header says which file this is

p2p { # library,version,transport,test,size,reps_ok,latency_us,p50,p99,bandwidth_MBps,wrong
    # a bandwidth becomes a time per message (B / (1e6 B/s) = us) for ranking
    add_row($1, $2, "p2p_" $4, 2, "-", $5, $4 == "latency" ? $7 : ($10 > 0 ? $5 / $10 : 0),
            $10, $6, $11)
    next
}

{   # library,version,transport,collective,nranks,placement,size,reps_ok,time_us,busbw,p50,p99,wrong
    add_row($1, $2, $4, $5, $6, $7, $9, $10, $8, $13)
}

function add_row(lib, ver, coll, np, pl, size, t, b, ok, w,    k, g) {
    k = lib SUBSEP coll SUBSEP np SUBSEP pl SUBSEP size
    tm[k] = t; bw[k] = b; nok[k] = ok; bad[k] = w
    version[lib] = ver
    g = coll SUBSEP np SUBSEP pl
    if (!((g SUBSEP size) in seen)) {
        seen[g SUBSEP size] = 1
        nsizes[g]++
        size_at[g, nsizes[g]] = size
    }
}

function place_name(pl) {
    return pl == "out" ? ", out-of-place" : pl == "in" ? ", in-place" : ""
}

function unit_of(coll, size) {
    if (coll == "p2p_latency") return "us"
    if (coll ~ /^p2p_/) return "MB/s"
    return size < 65536 ? "us" : "GB/s"
}

END {
    table = out "/table.txt"
    summary = out "/summary.csv"
    verdict = out "/verdict.txt"
    printf "" > table
    printf "" > verdict
    nl = split(libs, L, ",")
    nn = split(nps, N, " ")
    nc = split(colls, C, " ")
    npl = split(inplace ? "out in" : "out", P, " ")

    head = "collective,nranks,transport,placement,size,unit"
    for (i = 1; i <= nl; i++) head = head "," L[i]
    print head ",best_peer,best,ratio" > summary

    for (a = 1; a <= nn; a++) for (c = 1; c <= nc; c++) for (p = 1; p <= npl; p++)
        if (C[c] !~ /^p2p_/) group(C[c], N[a], P[p])
    for (c = 1; c <= nc; c++)
        if (C[c] ~ /^p2p_/) group(C[c], 2, "-")
    close(table); close(summary); close(verdict)
}

# One table: a collective at a rank count and placement.
function group(coll, np, pl,    g, n, s, i, j, size, unit, line, cells, k, v, best, bestlib,
               ours, ratio, nr, logsum, rmin, rmin_size, star, bang, ver, libline, sum_line) {
    g = coll SUBSEP np SUBSEP pl
    n = nsizes[g] + 0
    for (i = 1; i <= n; i++) s[i] = size_at[g, i]
    sort_sizes(s, n)

    libline = ""
    for (j = 1; j <= nl; j++)
        libline = libline sprintf("%s%s %s", j > 1 ? ", " : "", L[j],
                                  (L[j] in version) ? version[L[j]] : "(" why(L[j], coll, np) ")")
    printf "%s, %d ranks, %s%s (%s)\n", coll, np, transport, place_name(pl), libline > table
    if (coll == "p2p_latency")
        printf "one-way latency in us (half a ping-pong); median of %d runs; " \
            "ratio = best peer latency / libcoll latency (> 1: libcoll faster)\n", reps > table
    else if (coll ~ /^p2p_/)
        printf "bandwidth in MB/s (1e6 B/s), windows of 64 messages; median of %d runs; " \
            "ratio = libcoll / best peer (> 1: libcoll faster)\n", reps > table
    else
        printf "time per call in us below 64 KiB, busbw in GB/s from 64 KiB; median of %d runs; " \
            "ratio = best peer time / libcoll time (> 1: libcoll faster)\n", reps > table
    line = sprintf("%10s %5s", "size", "unit")
    for (j = 1; j <= nl; j++) line = line sprintf(" %11s", L[j])
    printf "%s %10s %7s\n", line, "best peer", "ratio" > table

    nr = 0; logsum = 0; rmin = -1; rmax = -1; nfaster = 0; star = 0; bang = 0
    if (n == 0) printf "%10s   no results\n", "-" > table
    for (i = 1; i <= n; i++) {
        size = s[i]
        unit = unit_of(coll, size)
        line = sprintf("%10s %5s", human(size), unit)
        sum_line = coll "," np "," transport "," pl "," size "," unit
        best = -1; bestlib = "-"; ours = -1
        for (j = 1; j <= nl; j++) {
            k = L[j] SUBSEP coll SUBSEP np SUBSEP pl SUBSEP size
            if (!(k in tm)) {
                cells = why(L[j], coll, np)
                line = line sprintf(" %11s", cells)
                sum_line = sum_line "," cells
                continue
            }
            v = unit == "us" ? tm[k] : bw[k]
            cells = unit == "us" ? fmt_time(v) : sprintf(unit == "MB/s" ? "%.1f" : "%.3f", v)
            if (nok[k] < reps) { cells = cells "*"; star = 1 }
            if (bad[k] > 0) { cells = cells "!"; bang = 1 }
            line = line sprintf(" %11s", cells)
            sum_line = sum_line "," sprintf("%.6g", v)
            if (bad[k] > 0) continue # wrong results never count as fast
            if (tm[k] <= 0) continue # no usable number (a bandwidth of 0)
            if (L[j] == "libcoll") ours = tm[k]
            else if (best < 0 || tm[k] < best) { best = tm[k]; bestlib = L[j] }
        }
        ratio = (ours > 0 && best > 0) ? best / ours : -1
        line = line sprintf(" %10s %7s", bestlib, ratio > 0 ? sprintf("%.2f", ratio) : "-")
        print line > table
        sum_line = sum_line "," bestlib "," (best > 0 ? sprintf("%.6g", unit == "us" ? best : \
            bestbw(bestlib, coll, np, pl, size)) : "-") "," (ratio > 0 ? sprintf("%.4f", ratio) : "-")
        print sum_line > summary
        if (ratio > 0) {
            nr++
            logsum += log(ratio)
            if (rmin < 0 || ratio < rmin) { rmin = ratio; rmin_size = size }
            if (rmax < 0 || ratio > rmax) { rmax = ratio; rmax_size = size }
            if (ratio >= 1) nfaster++
        }
    }
    if (star) printf "  * fewer than %d runs gave this number (see runs.csv)\n", reps > table
    if (bang) printf "  ! wrong results (wrong > 0 in medians.csv): never counted as best\n" > table
    for (j = 1; j <= nl; j++)
        if (why(L[j], coll, np) ~ /skipped|n\/a/ && (L[j] in reason))
            printf "  %s\n", reason[L[j]] > table
    printf "\n" > table

    printf "libcoll vs best peer, %d ranks %s %s%s: ", np, coll, transport, place_name(pl) > verdict
    if (nr == 0)
        printf "no ratio (%s)\n", ("libcoll" in reason) ? reason["libcoll"] : \
            n == 0 ? "no results; libcoll: " why("libcoll", coll, np) : \
            "no size where libcoll and a peer both have a correct number" > verdict
    else
        printf "faster at %d of %d sizes; ratio min %.2f at %s, max %.2f at %s, geometric " \
            "mean %.2f (> 1: libcoll faster)\n", nfaster, nr, rmin, human(rmin_size), rmax,
            human(rmax_size), exp(logsum / nr) > verdict
}

function bestbw(lib, coll, np, pl, size) {
    return bw[lib SUBSEP coll SUBSEP np SUBSEP pl SUBSEP size]
}
