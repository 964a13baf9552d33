# Shared by the check scripts that start devices (jvm-jar-check,
# jvm-consumer-check, fuzz-foreign-check, and jvm-device-check for the
# binary): which cetp runs, free ports, a device started and waited for,
# every started process stopped. Sourced, not run: set `check` (the name
# every message carries) and `root` (the checkout) first.

# cetp: CETP_BIN, else this checkout's debug build (built here).
check_cetp() {
    if [ -n "${CETP_BIN:-}" ]; then
        cetp="$CETP_BIN"
    else
        cargo build -q -p cetp-cli
        cetp="${CARGO_TARGET_DIR:-$root/target}/debug/cetp"
    fi
}

# A loopback port free now (another process may take it before it is bound:
# the device then fails to start, and says so).
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# Every device or simulator a check started; stop_all ends them (the
# scripts' EXIT trap calls it too).
pids=()
stop_all() {
    local p
    for p in "${pids[@]}"; do
        kill "$p" 2>/dev/null || true
        wait "$p" 2>/dev/null || true
    done
    pids=()
}

# wait_ready LOG PID [LINE]: waits for LINE (default "ready") in LOG from
# process PID, at most 300 s; quotes LOG and exits 1 if it dies or never
# gets there.
wait_ready() {
    local _
    for _ in $(seq 600); do
        grep -q "${3:-ready}" "$1" && return 0
        if ! kill -0 "$2" 2>/dev/null; then
            cat "$1" >&2
            echo "$check: the device exited before it was ready" >&2
            exit 1
        fi
        sleep 0.5
    done
    cat "$1" >&2
    echo "$check: the device was not ready within 300 s" >&2
    exit 1
}

# start_jvm LOG [jvm-device.sh flags…]: the JVM device (already built) on
# two free ports, identity a's in $a and b's in $b, its output in LOG;
# returns once it is ready.
start_jvm() {
    local log="$1"
    shift
    a="127.0.0.1:$(free_port)"
    b="127.0.0.1:$(free_port)"
    : > "$log"
    nice -n 10 "$root/scripts/jvm-device.sh" --listen "$a" --listen-b "$b" --no-build "$@" > "$log" 2>&1 &
    pids+=($!)
    wait_ready "$log" "$!"
}
