#!/bin/sh
# run.sh FUZZ_DIR SECONDS: run every fuzz target built in FUZZ_DIR for
# SECONDS each, starting from its seed corpus (tests/fuzz/corpus/<target>,
# every seed and regression input is replayed first) and its dictionary
# (tests/fuzz/<target>.dict) if any. New inputs are kept in
# FUZZ_DIR/corpus/<target>, crashes in FUZZ_DIR/crashes/<target>/.
# Prints one line per target: executions, corpus size, and any crash with
# its reproducer. Fails if a target crashed; prints "skipped: <reason>"
# when no target was built (no clang or libFuzzer).
dir=${1:-build/fuzz}
secs=${2:-60}
src=$(dirname "$0")
targets=$(find "$dir" -maxdepth 1 -name "fuzz_*" -type f -perm -u+x 2>/dev/null | sort)
if [ -z "$targets" ]; then
    echo "fuzz: skipped: no fuzz targets in $dir (clang or libFuzzer missing)"
    exit 0
fi
fail=0; failed=""
start=$(date +%s)
for t in $targets; do
    name=$(basename "$t")
    seeds="$src/corpus/$name"
    work="$dir/corpus/$name"
    crashes="$dir/crashes/$name/"
    log="$dir/logs/$name.log"
    mkdir -p "$work" "$crashes" "$dir/logs"
    dict=""
    [ -f "$src/$name.dict" ] && dict="-dict=$src/$name.dict"
    # -timeout: an input that runs this long is a hang; -rss_limit_mb: a
    # parser that allocates what a length field says is a bug here.
    "$t" -max_total_time="$secs" -timeout=10 -rss_limit_mb=1024 -max_len=8192 \
        -print_final_stats=1 -artifact_prefix="$crashes" $dict "$work" "$seeds" >"$log" 2>&1
    rc=$?
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1)
    if [ $rc -eq 0 ]; then
        echo "== $name: ok, ${execs:-?} executions in $secs s, ${cov:-cov: ?}, corpus $(ls "$work" | wc -l) new inputs"
    else
        fail=$((fail + 1)); failed="$failed $name"
        repro=$(sed -n 's/.*Test unit written to \(.*\)/\1/p' "$log" | tail -1)
        echo "== $name: CRASHED after ${execs:-?} executions; reproducer: ${repro:-none written}"
        echo "   reproduce: $t $repro"
        grep -m3 -E 'ERROR: |invariant broken|runtime error' "$log" | sed 's/^/   /'
        echo "   full log: $log"
    fi
done
echo "== fuzz: $(echo $targets | wc -w) targets, $fail crashed in $(( $(date +%s) - start )) s${failed:+:$failed}"
[ "$fail" -eq 0 ]
