#!/bin/sh
# run.sh BUILD_DIR: run every test program, print a summary, fail if any failed.
build=${1:-build}
export COLL_TEST_BUILD="$build"
pass=0; fail=0; failed=""
start=$(date +%s)
for t in "$build"/tests/test_*; do
    [ -x "$t" ] || continue
    name=$(basename "$t")
    t0=$(date +%s)
    if "$t"; then
        pass=$((pass + 1)); verdict=ok
    else
        fail=$((fail + 1)); failed="$failed $name"; verdict=FAILED
    fi
    echo "== $name: $verdict ($(( $(date +%s) - t0 )) s)"
done
echo "== $pass test programs passed, $fail failed in $(( $(date +%s) - start )) s${failed:+:$failed}"
[ "$fail" -eq 0 ]
