#!/usr/bin/env bash
# Runs one SQL workload through `sqlite3` (plain SQLite on an ordinary file), `sqlcipher`
# (with a key) and `dpctl sql` (a class `complete` database in a store), on the same disk
# with the same pragmas (synchronous=FULL; rollback journal, then WAL; 4 KiB pages: SQLCipher
# 3 is given cipher_page_size=4096, its default being 1 KiB), and prints each
# part's rate and its ratio to plain SQLite (> 1: faster than plain).
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
        -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
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

now() { date +%s.%N; }
# run <tool> <mode> <part> <round>: seconds for one script (each round on its own databases).
run() {
    local tool="$1" mode="$2" part="$3" round="$4" start end
    local pragmas="PRAGMA synchronous=FULL; PRAGMA journal_mode=$mode;"
    sync
    start=$(now)
    case "$tool" in
        sqlite3) { echo "$pragmas"; cat "$work/$part.sql"; } | sqlite3 "$work/plain-$mode-$round.db" >/dev/null ;;
        # SQLCipher 3 (Debian's) pages 1 KiB by default, SQLite and SQLCipher 4 4 KiB: the
        # same page for all three (a quarter of the bytes per commit is not a fair comparison).
        sqlcipher) { echo "PRAGMA key='benchmark passphrase'; PRAGMA cipher_page_size=4096; $pragmas"; cat "$work/$part.sql"; } | sqlcipher "$work/cipher-$mode-$round.db" >/dev/null ;;
        dpctl) { echo "$pragmas"; cat "$work/$part.sql"; } | DPCTL_STORE="$work/store" DPCTL_DEVICE="$work/device" \
                   "$dpctl" sql "bench-$mode-$round.db" --create --class complete >/dev/null ;;
    esac
    end=$(now)
    python3 -c "print($end - $start)"
}

DPCTL_STORE="$work/store" DPCTL_DEVICE="$work/device" "$dpctl" init --no-passcode >/dev/null
printf '%-34s %12s %12s %12s %10s %10s %10s\n' "part (medians of $rounds)" "sqlite3" "sqlcipher" "dpctl sql" "cipher/pl" "dpctl/pl" "dpctl/ciph"
tools=(sqlite3 sqlcipher dpctl)
for mode in delete wal; do
    declare -A times=()
    for round in $(seq 1 "$rounds"); do
        for i in 0 1 2; do
            tool=${tools[$(( (i + round) % 3 ))]}  # the order rotates: no tool always runs first
            for part in tx auto select; do
                times[$tool,$part]+="$(run "$tool" "$mode" "$part" "$round") "
            done
        done
    done
    for part in tx auto select; do
        case "$part" in tx) count=$tx_rows; what="inserts, 1000/tx" ;; auto) count=$auto_rows; what="autocommit inserts" ;;
                        select) count=$selects; what="point selects" ;; esac
        python3 - "$mode" "$what" "$count" "${times[sqlite3,$part]}" "${times[sqlcipher,$part]}" "${times[dpctl,$part]}" <<'PY'
import statistics, sys
mode, what, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
plain, cipher, ours = (statistics.median(map(float, arg.split())) for arg in sys.argv[4:])
rate = lambda s: f"{count / s:,.0f}/s"
print(f"{(what + ' (' + ('WAL' if mode == 'wal' else 'rollback') + ')'):<34} {rate(plain):>12} {rate(cipher):>12} {rate(ours):>12} {plain / cipher:>10.2f} {plain / ours:>10.2f} {cipher / ours:>10.2f}")
PY
    done
    unset times
done
echo "($(sqlite3 --version | cut -d' ' -f1) for sqlite3; sqlcipher $(sqlcipher :memory: 'PRAGMA cipher_version' 2>/dev/null || true) on SQLite $(sqlcipher :memory: 'select sqlite_version()'); $("$dpctl" --version) over SQLite $(sqlite3 :memory: 'select sqlite_version()'))"
