#!/usr/bin/env bash
# Runs one SQL workload through `sqlite3` (plain SQLite on an ordinary file), `sqlcipher`
# without a key (SQLCipher's own SQLite, unencrypted), `sqlcipher` with a key and `dpctl sql`
# (a class `complete` database in a store), on the same disk with the same pragmas
# (synchronous=FULL; rollback journal, then WAL; 4 KiB pages: SQLCipher 3 is given
# cipher_page_size=4096, its default being 1 KiB), and prints each part's rate (elapsed time)
# and CPU time (user + system: what a busy host's stolen time does not inflate, unlike the
# elapsed time, which swings by a fifth between runs on a shared machine), with ratios (> 1:
# the first named is faster, or takes less CPU):
#   dpctl/pl     dpctl sql to plain SQLite (the SQLite it runs on)
#   cipher/own   SQLCipher to its own SQLite without a key (what its encryption costs)
#   dpctl/ciph   dpctl sql to SQLCipher
#   engines      Debian's SQLite to SQLCipher's (Debian's SQLCipher 3 is built on an older
#                SQLite, with fewer features compiled in: part of any dpctl/ciph difference)
#
#   Benchmarks/compare-sqlcipher.sh [--scale N] [--rounds N] [--dir DIR]
#
# The parts: 100,000 inserts in transactions of 1,000; 10,000 autocommit inserts (each
# one fsynced); 100,000 point selects by primary key. Each is one script, run by one
# process of each tool, parsed statement by statement by each tool alike. --scale N
# divides the counts. --rounds N (default 3) runs every tool N times on fresh databases,
# the tools' order rotating each round, and prints medians. Needs sqlite3 and sqlcipher
# (Debian: apt-get install sqlite3 sqlcipher) and a release dpctl (built here if missing).
set -euo pipefail

scale=1
rounds=3
dir=""
while [ $# -gt 0 ]; do
    case "$1" in
        --scale) scale="$2"; shift 2 ;;
        --rounds) rounds="$2"; shift 2 ;;
        --dir) dir="$2"; shift 2 ;;
        -h|--help) sed -n '2,23p' "$0"; exit 0 ;;
        *) echo "unknown option: $1" >&2; exit 2 ;;
    esac
done

root="$(cd "$(dirname "$0")/.." && pwd)"
for tool in sqlite3 sqlcipher python3; do
    command -v "$tool" >/dev/null || { echo "missing: $tool (Debian: apt-get install sqlite3 sqlcipher)" >&2; exit 1; }
done
dpctl="$root/.build/release/dpctl"
if [ ! -x "$dpctl" ]; then
    (cd "$root" && swift build -c release --product dpctl >&2)
fi

work="${dir:-$(mktemp -d "${TMPDIR:-/tmp}/dpctl-vs-sqlcipher.XXXXXX")}"
mkdir -p "$work"
trap 'rm -rf "$work"' EXIT

tx_rows=$((100000 / scale)); auto_rows=$((10000 / scale)); selects=$((100000 / scale))
python3 - "$work" "$tx_rows" "$auto_rows" "$selects" <<'PY'
import random, sys
work, tx_rows, auto_rows, selects = sys.argv[1], *map(int, sys.argv[2:])
value = "x'" + "a5" * 100 + "'"
with open(f"{work}/tx.sql", "w") as f:
    f.write("CREATE TABLE kv(id INTEGER PRIMARY KEY, k TEXT NOT NULL, v BLOB NOT NULL);\n")
    per = min(1000, tx_rows)
    for start in range(0, tx_rows, per):
        f.write("BEGIN;\n")
        for i in range(start + 1, start + per + 1):
            f.write(f"INSERT INTO kv(id, k, v) VALUES ({i}, 'key {i}', {value});\n")
        f.write("COMMIT;\n")
with open(f"{work}/auto.sql", "w") as f:
    for i in range(tx_rows + 1, tx_rows + auto_rows + 1):
        f.write(f"INSERT INTO kv(id, k, v) VALUES ({i}, 'key {i}', {value});\n")
rng = random.Random(0x5EED)
with open(f"{work}/select.sql", "w") as f:
    for _ in range(selects):
        f.write(f"SELECT length(v) FROM kv WHERE id = {rng.randint(1, tx_rows + auto_rows)};\n")
PY

# run_tool <tool> <mode> <part> <round>: one script through one tool (each round on its own databases).
run_tool() {
    local tool="$1" mode="$2" part="$3" round="$4"
    local pragmas="PRAGMA synchronous=FULL; PRAGMA journal_mode=$mode;"
    case "$tool" in
        sqlite3) { echo "$pragmas"; cat "$work/$part.sql"; } | sqlite3 "$work/plain-$mode-$round.db" ;;
        # SQLCipher 3 (Debian's) pages 1 KiB by default, SQLite and SQLCipher 4 4 KiB: the
        # same page for all three (a quarter of the bytes per commit is not a fair comparison).
        sqlcipher) { echo "PRAGMA key='benchmark passphrase'; PRAGMA cipher_page_size=4096; $pragmas"; cat "$work/$part.sql"; } | sqlcipher "$work/cipher-$mode-$round.db" ;;
        sqlcipher-plain) { echo "$pragmas"; cat "$work/$part.sql"; } | sqlcipher "$work/cipher-plain-$mode-$round.db" ;;
        dpctl) { echo "$pragmas"; cat "$work/$part.sql"; } | DPCTL_STORE="$work/store" DPCTL_DEVICE="$work/device" \
                   "$dpctl" sql "bench-$mode-$round.db" --create --class complete ;;
    esac >/dev/null 2>"$work/stderr"
}
# run <tool> <mode> <part> <round>: "elapsed cpu" seconds (cpu: user + system of all its
# processes, which a busy host's stolen time does not inflate as it does the elapsed time).
run() {
    local TIMEFORMAT='%R %U %S'
    sync
    { time run_tool "$@"; } 2>"$work/time" || { cat "$work/stderr" >&2; exit 1; }
    read -r real user system <"$work/time"
    python3 -c "print(f'{$real} {$user + $system}')"
}

DPCTL_STORE="$work/store" DPCTL_DEVICE="$work/device" "$dpctl" init --no-passcode >/dev/null
tools=(sqlite3 sqlcipher-plain sqlcipher dpctl)
for mode in delete wal; do
    declare -A times=() cpus=()
    for round in $(seq 1 "$rounds"); do
        for i in 0 1 2 3; do
            tool=${tools[$(( (i + round) % 4 ))]}  # the order rotates: no tool always runs first
            for part in tx auto select; do
                read -r elapsed cpu <<<"$(run "$tool" "$mode" "$part" "$round")"
                times[$tool,$part]+="$elapsed "
                cpus[$tool,$part]+="$cpu "
            done
        done
    done
    for part in tx auto select; do
        case "$part" in tx) count=$tx_rows; what="inserts, 1000/tx" ;; auto) count=$auto_rows; what="autocommit inserts" ;;
                        select) count=$selects; what="point selects" ;; esac
        python3 - "$mode" "$what" "$count" "${times[sqlite3,$part]}" "${times[sqlcipher-plain,$part]}" "${times[sqlcipher,$part]}" \
            "${times[dpctl,$part]}" <<'PY' >>"$work/rates"
import statistics, sys
mode, what, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
plain, cipher_plain, cipher, ours = (statistics.median(map(float, arg.split())) for arg in sys.argv[4:])
rate = lambda s: f"{count / s:,.0f}/s"
print(f"{(what + ' (' + ('WAL' if mode == 'wal' else 'rollback') + ')'):<34} {rate(plain):>11} {rate(cipher_plain):>11} {rate(cipher):>11} "
      f"{rate(ours):>11} {plain / ours:>9.2f} {cipher_plain / cipher:>10.2f} {cipher / ours:>10.2f} {cipher_plain / plain:>8.2f}")
PY
        python3 - "$mode" "$what" "${cpus[sqlite3,$part]}" "${cpus[sqlcipher-plain,$part]}" "${cpus[sqlcipher,$part]}" \
            "${cpus[dpctl,$part]}" <<'PY' >>"$work/cpu"
import statistics, sys
mode, what = sys.argv[1], sys.argv[2]
plain, cipher_plain, cipher, ours = (statistics.median(map(float, arg.split())) for arg in sys.argv[3:])
print(f"{(what + ' (' + ('WAL' if mode == 'wal' else 'rollback') + ')'):<34} {plain:>10.2f}s {cipher_plain:>10.2f}s {cipher:>10.2f}s "
      f"{ours:>10.2f}s {plain / ours:>9.2f} {cipher_plain / cipher:>10.2f} {cipher / ours:>10.2f} {cipher_plain / plain:>8.2f}")
PY
    done
    unset times cpus
done
printf '%-34s %11s %11s %11s %11s %9s %10s %10s %8s\n' "rates (medians of $rounds)" "sqlite3" "sqlcipher-0" "sqlcipher" "dpctl sql" "dpctl/pl" "cipher/own" "dpctl/ciph" "engines"
cat "$work/rates"
echo
printf '%-34s %11s %11s %11s %11s %9s %10s %10s %8s\n' "CPU, user + system (medians)" "sqlite3" "sqlcipher-0" "sqlcipher" "dpctl sql" "dpctl/pl" "cipher/own" "dpctl/ciph" "engines"
cat "$work/cpu"
echo "($(sqlite3 --version | cut -d' ' -f1) for sqlite3; sqlcipher $(sqlcipher :memory: 'PRAGMA cipher_version' 2>/dev/null || true) on SQLite $(sqlcipher :memory: 'select sqlite_version()'); $("$dpctl" --version) over SQLite $(sqlite3 :memory: 'select sqlite_version()'))"
