#!/usr/bin/env bash
# A CPU-bound neighbour around a command: what a shared CI machine or production host does to
# the tests and soaks (issue 45: a fresh-clone CI run failed beside one unrelated 3-minute CPU
# job). Starts N busy loops (one core each), optionally pinned to a core and optionally only
# after a delay (a neighbour that arrives halfway through a soak), runs the command, then stops
# the loops it started, by their PIDs, whatever the command's exit. Exits with the command's
# status; prints on stderr when the neighbour starts and how much CPU it burned. `--when FILE`:
# the delay counts from the moment FILE exists (e.g. a soak's start, after its setup).
#
#   scripts/neighbour.sh [--cores N] [--pin CORE] [--after SECONDS] [--when FILE] -- COMMAND...
#
# e.g. the suite beside a one-core neighbour:  scripts/neighbour.sh -- make test
set -euo pipefail

cores=1
pin=""
after=0
when=""
while [[ $# -gt 0 ]]; do
    case "$1" in
        --cores) cores="$2"; shift 2 ;;
        --pin) pin="$2"; shift 2 ;;
        --after) after="$2"; shift 2 ;;
        --when) when="$2"; shift 2 ;;
        --) shift; break ;;
        -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
        *) echo "neighbour.sh: unknown option $1 (want --cores, --pin, --after, --when, then -- COMMAND)" >&2; exit 2 ;;
    esac
done
if [[ $# -eq 0 ]]; then
    echo "neighbour.sh: no command given (scripts/neighbour.sh [options] -- COMMAND)" >&2
    exit 2
fi

pids=()
stop() {
    local pid ticks total=0
    for pid in "${pids[@]}"; do
        if [[ -r /proc/$pid/stat ]]; then
            # utime + stime, fields 14 and 15, in clock ticks
            ticks=$(awk '{print $14 + $15}' "/proc/$pid/stat")
            total=$((total + ticks))
        fi
        kill "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
    echo "neighbour: stopped ${#pids[@]} busy loop(s), $(awk -v t="$total" -v hz="$(getconf CLK_TCK)" 'BEGIN {printf "%.1f", t / hz}') CPU s burned" >&2
}
trap stop EXIT
trap 'exit 130' INT TERM

for _ in $(seq "$cores"); do
    # a busy loop that first waits for the file, then `after` seconds (sleep costs no CPU)
    loop=(python3 -c "import os, sys, time
while sys.argv[1] and not os.path.exists(sys.argv[1]): time.sleep(0.5)
time.sleep(float(sys.argv[2]))
while True: pass" "$when" "$after")
    if [[ -n "$pin" ]]; then
        taskset -c "$pin" "${loop[@]}" &
    else
        "${loop[@]}" &
    fi
    pids+=("$!")
done
echo "neighbour: ${cores} busy loop(s) (pids ${pids[*]}${pin:+, pinned to core $pin}), starting ${after}s after ${when:-now}" >&2

status=0
"$@" || status=$?
exit "$status"
