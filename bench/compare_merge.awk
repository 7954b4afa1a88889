# compare_merge.awk: medians over repetitions, for bench/compare.sh.
#
# Input: coll_perf CSV rows from every run (field 1 already replaced by the
# library that ran), header lines removed:
#   1 library 2 version 3 transport 4 collective 5 nranks 6 size 7 count
#   8 type 9 redop 10 root 11 placement 12 time_us 13 algbw 14 busbw
#   15 p50_us 16 p99_us 17 wrong
# Output, one row per (library, collective, nranks, placement, size):
#   library,version,transport,collective,nranks,placement,size,reps_ok,
#   time_us,busbw,p50_us,p99_us,wrong
# time, p50 and p99 are medians over the repetitions that produced the
# row; busbw is recomputed from the median time (nccl-tests factors), so
# that a busbw and a time in the table always agree; wrong is the sum.
#
# With -v p2p=1 the input is p2p_perf CSV rows
#   1 library 2 version 3 transport 4 test 5 size 6 latency_us 7 p50_us
#   8 p99_us 9 bandwidth_MBps 10 wrong
# (latency fields empty for bw/bibw, bandwidth empty for latency) and the
# output one row per (library, test, size):
#   library,version,transport,test,size,reps_ok,latency_us,p50_us,p99_us,
#   bandwidth_MBps,wrong
# Plain POSIX awk (Debian's default is mawk): no asort.

function bus_factor(coll, n) {
    if (coll == "all_reduce") return 2 * (n - 1) / n
    if (coll == "broadcast" || coll == "reduce") return 1
    return (n - 1) / n
}

# Median of the numbers in the space-separated string s.
function median(s,    v, n, i, j, x) {
    n = split(s, v, " ")
    for (i = 2; i <= n; i++) { # insertion sort: a handful of values
        x = v[i] + 0
        for (j = i - 1; j >= 1 && v[j] + 0 > x; j--) v[j + 1] = v[j]
        v[j + 1] = x
    }
    return n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
}

!p2p && $6 == 0 { next } # a size too small to give each rank an element

p2p {
    key = $1 SUBSEP $4 SUBSEP $5
    if (!(key in n)) { n[key] = 0; wrong[key] = 0; ver[key] = $2; tr[key] = $3 }
    n[key]++
    for (f = 6; f <= 9; f++)
        if ($f != "") col[key, f] = col[key, f] " " $f
    wrong[key] += $10
    next
}

{
    key = $1 SUBSEP $4 SUBSEP $5 SUBSEP $11 SUBSEP $6
    if (!(key in n)) {
        n[key] = 0
        wrong[key] = 0
        ver[key] = $2
        tr[key] = $3
    }
    n[key]++
    t[key] = t[key] " " $12
    p50[key] = p50[key] " " $15
    p99[key] = p99[key] " " $16
    wrong[key] += $17
}

END {
    if (p2p) {
        for (key in n) {
            split(key, k, SUBSEP)
            line = k[1] "," ver[key] "," tr[key] "," k[2] "," k[3] "," n[key]
            for (f = 6; f <= 9; f++)
                line = line "," (((key, f) in col) ? sprintf("%.3f", median(col[key, f])) : "")
            print line "," wrong[key]
        }
        exit
    }
    for (key in n) {
        split(key, k, SUBSEP)
        tm = median(t[key])
        bw = tm > 0 ? k[5] / tm / 1e3 * bus_factor(k[2], k[3]) : 0
        printf "%s,%s,%s,%s,%d,%s,%s,%d,%.3f,%.6g,%.3f,%.3f,%d\n", k[1], ver[key], tr[key],
            k[2], k[3], k[4], k[5], n[key], tm, bw, median(p50[key]), median(p99[key]), wrong[key]
    }
}
