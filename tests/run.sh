#!/bin/sh
# run.sh BUILD_DIR [TEST...]: run the test programs (all, or the ones named),
# print a summary, fail if any failed. Under COLL_TEST_SANITIZER (asan or
# tsan, set by make test-sanitize) the programs that cannot run sanitized
# are skipped, each with its reason.
build=${1:-build}
[ $# -gt 0 ] && shift
export COLL_TEST_BUILD="$build"
pass=0; fail=0; skip=0; failed=""
start=$(date +%s)
# Each program's output is kept, so that the summary can repeat why a program
# failed: CI shows only the tail of the log.
logs=$(mktemp -d) || exit 1
trap 'rm -rf "$logs"' EXIT

# Why a test cannot run under the sanitizer $COLL_TEST_SANITIZER; empty if it can.
sanitizer_skip() {
    case "$COLL_TEST_SANITIZER:$1" in
    :*) ;;
    *:test_install)
        echo "make install relinks the library without the sanitizer runtime" ;;
    *:test_bench|*:test_compare|*:test_cluster)
        echo "runs the benchmarks and the peers, which are measured, not sanitized" ;;
    esac
}

if [ $# -gt 0 ]; then
    tests=""
    for n in "$@"; do tests="$tests $build/tests/$n"; done
else
    tests=$(ls "$build"/tests/test_* 2>/dev/null)
fi
for t in $tests; do
    name=$(basename "$t")
    why=$(sanitizer_skip "$name")
    if [ -n "$why" ]; then
        skip=$((skip + 1))
        echo "== $name: skipped: $why"
        continue
    fi
    if [ ! -x "$t" ]; then
        fail=$((fail + 1)); failed="$failed $name"
        echo "== $name: FAILED (not built)"
        continue
    fi
    t0=$(date +%s)
    # To a file, then shown: through a pipe to tee, a rank process left
    # behind by a failed test would hold the pipe open and hang the run.
    "$t" > "$logs/$name.log" 2>&1
    rc=$?
    cat "$logs/$name.log"
    if [ $rc -eq 0 ]; then
        pass=$((pass + 1)); verdict=ok
    else
        fail=$((fail + 1)); failed="$failed $name"; verdict=FAILED
    fi
    echo "== $name: $verdict ($(( $(date +%s) - t0 )) s)"
done
# Check's failure lines (file:line:F|E:...), the ranks' failed checks and the
# harness's verdicts on ranks, 40 lines at most per failed program.
for name in $failed; do
    [ -f "$logs/$name.log" ] || continue
    echo "== $name failed with:"
    grep -E ':[0-9]+:[FE]:|check failed at|^harness: |ERROR: .*Sanitizer|runtime error' \
        "$logs/$name.log" | head -40
done
echo "== ${COLL_TEST_SANITIZER:+$COLL_TEST_SANITIZER: }$pass test programs passed, $fail failed${skip:+, $skip skipped} in $(( $(date +%s) - start )) s${failed:+:$failed}"
[ "$fail" -eq 0 ]
