#!/usr/bin/env bash
# Times `dpctl put` / `dpctl get` against `age` (X25519 recipient) on the same
# file, alternating the tools round by round, and prints the ratios of their
# median times (> 1: dpctl is faster) and their peak resident memory.
#
#   Benchmarks/compare-age.sh [--size MiB] [--rounds N] [--no-passcode] [--dir DIR]
#
# Needs: age and age-keygen (Debian: apt-get install age), GNU time (/usr/bin/time),
# and a release dpctl (built here if missing). Every run starts after `sync`
# with its output removed, so no run pays for another's write-back. dpctl put
# is durable on return (fsync of the file and its directory); age does not
# fsync. dpctl get -o fsyncs its output (then renames it into place); age -o does
# not: the third row has both write to /dev/null, which compares the decryption alone,
# and the last two rows give age the same durability (its output fsynced: `sync FILE`).
# The last three rows do the same with an unlocked agent (`dpctl agent start`, one
# unlock): no Argon2id per command, and the agent reads the input file and writes
# the output descriptor itself (peak memory is then the client's).
set -euo pipefail

size_mib=1024
rounds=3
passcode=1
dir=""
while [ $# -gt 0 ]; do
    case "$1" in
        --size) size_mib="$2"; shift 2 ;;
        --rounds) rounds="$2"; shift 2 ;;
        --no-passcode) passcode=0; shift ;;
        --dir) dir="$2"; shift 2 ;;
        -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
        *) echo "unknown option: $1" >&2; exit 2 ;;
    esac
done

root="$(cd "$(dirname "$0")/.." && pwd)"
for tool in age age-keygen /usr/bin/time; do
    command -v "$tool" >/dev/null || { echo "missing: $tool (Debian: apt-get install age time)" >&2; exit 1; }
done
dpctl="$root/.build/release/dpctl"
if [ ! -x "$dpctl" ]; then
    (cd "$root" && swift build -c release --product dpctl >&2)
fi

work="${dir:-$(mktemp -d "${TMPDIR:-/tmp}/dpctl-vs-age.XXXXXX")}"
mkdir -p "$work"
trap '"$dpctl" agent stop >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
export DPCTL_STORE="$work/store"
export DPCTL_PASSCODE=1234

head -c "$((size_mib << 20))" /dev/urandom > "$work/input"
age-keygen -o "$work/key.txt" 2>/dev/null
recipient="$(grep -o 'age1[0-9a-z]*' "$work/key.txt")"
if [ "$passcode" = 1 ]; then "$dpctl" init >/dev/null; else "$dpctl" init --no-passcode >/dev/null; fi

# run NAME COMMAND...: appends "seconds peak_kib" to $work/NAME.times
run() {
    local name="$1"; shift
    sync
    /usr/bin/time -f "%e %M" -o "$work/last.time" "$@" >/dev/null
    cat "$work/last.time" >> "$work/$name.times"
}

for round in $(seq 1 "$rounds"); do
    rm -f "$work/out.age" "$work/out.dp" "$work/input.age"
    "$dpctl" rm big >/dev/null 2>&1 || true
    if [ $((round % 2)) = 1 ]; then
        run age_enc age -r "$recipient" -o "$work/input.age" "$work/input"
        run dpctl_put "$dpctl" put --quiet "$work/input" big
    else
        run dpctl_put "$dpctl" put --quiet "$work/input" big
        run age_enc age -r "$recipient" -o "$work/input.age" "$work/input"
    fi
    if [ $((round % 2)) = 1 ]; then
        run age_dec age -d -i "$work/key.txt" -o "$work/out.age" "$work/input.age"
        run dpctl_get "$dpctl" get --quiet big -o "$work/out.dp"
    else
        run dpctl_get "$dpctl" get --quiet big -o "$work/out.dp"
        run age_dec age -d -i "$work/key.txt" -o "$work/out.age" "$work/input.age"
    fi
    # Decryption alone: both to standard output, into /dev/null (no output file, no fsync).
    if [ $((round % 2)) = 1 ]; then
        run age_dec_null age -d -i "$work/key.txt" "$work/input.age"
        run dpctl_get_null "$dpctl" get --quiet big
    else
        run dpctl_get_null "$dpctl" get --quiet big
        run age_dec_null age -d -i "$work/key.txt" "$work/input.age"
    fi
    cmp -s "$work/input" "$work/out.dp" || { echo "dpctl round trip differs" >&2; exit 1; }
    cmp -s "$work/input" "$work/out.age" || { echo "age round trip differs" >&2; exit 1; }
done

# The same through an unlocked agent.
"$dpctl" agent start --auto-lock never >/dev/null
"$dpctl" unlock >/dev/null
for round in $(seq 1 "$rounds"); do
    rm -f "$work/out.age" "$work/out.dp" "$work/input.age"
    "$dpctl" rm big >/dev/null 2>&1 || true
    if [ $((round % 2)) = 1 ]; then
        run age_enc_2 age -r "$recipient" -o "$work/input.age" "$work/input"
        run agent_put "$dpctl" put --quiet "$work/input" big
        run age_dec_2 age -d -i "$work/key.txt" -o "$work/out.age" "$work/input.age"
        run agent_get "$dpctl" get --quiet big -o "$work/out.dp"
        run age_dec_null_2 age -d -i "$work/key.txt" "$work/input.age"
        run agent_get_null "$dpctl" get --quiet big
        rm -f "$work/input.age" "$work/out.age"
        run age_enc_sync sh -c 'age -r "$1" -o "$2" "$3" && sync "$2"' sh "$recipient" "$work/input.age" "$work/input"
        run age_dec_sync sh -c 'age -d -i "$1" -o "$2" "$3" && sync "$2"' sh "$work/key.txt" "$work/out.age" "$work/input.age"
    else
        run agent_put "$dpctl" put --quiet "$work/input" big
        run age_enc_2 age -r "$recipient" -o "$work/input.age" "$work/input"
        run agent_get "$dpctl" get --quiet big -o "$work/out.dp"
        run age_dec_2 age -d -i "$work/key.txt" -o "$work/out.age" "$work/input.age"
        run agent_get_null "$dpctl" get --quiet big
        run age_dec_null_2 age -d -i "$work/key.txt" "$work/input.age"
        rm -f "$work/input.age" "$work/out.age"
        run age_enc_sync sh -c 'age -r "$1" -o "$2" "$3" && sync "$2"' sh "$recipient" "$work/input.age" "$work/input"
        run age_dec_sync sh -c 'age -d -i "$1" -o "$2" "$3" && sync "$2"' sh "$work/key.txt" "$work/out.age" "$work/input.age"
    fi
    cmp -s "$work/input" "$work/out.dp" || { echo "dpctl (agent) round trip differs" >&2; exit 1; }
done
"$dpctl" agent stop >/dev/null

median() { sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
col() { awk -v c="$2" '{ print $c }' "$work/$1.times" | median; }

echo "dpctl vs age, ${size_mib} MiB, ${rounds} alternating rounds, medians; store passcode: $([ "$passcode" = 1 ] && echo yes || echo no)"
printf '%-28s %10s %10s %12s %14s %14s\n' "operation" "dpctl s" "age s" "age/dpctl" "dpctl peak MiB" "age peak MiB"
for pair in "encrypt (put):dpctl_put:age_enc" "decrypt (get -o):dpctl_get:age_dec" "decrypt to /dev/null:dpctl_get_null:age_dec_null" \
            "agent, put:agent_put:age_enc_2" "agent, get -o:agent_get:age_dec_2" "agent, get >/dev/null:agent_get_null:age_dec_null_2" \
            "agent, put vs age+sync:agent_put:age_enc_sync" "agent, get -o vs age+sync:agent_get:age_dec_sync"; do
    IFS=: read -r label ours theirs <<<"$pair"
    d="$(col "$ours" 1)"; a="$(col "$theirs" 1)"
    dm="$(col "$ours" 2)"; am="$(col "$theirs" 2)"
    awk -v l="$label" -v d="$d" -v a="$a" -v dm="$dm" -v am="$am" \
        'BEGIN { printf "%-28s %10.2f %10.2f %12.2f %14.1f %14.1f\n", l, d, a, a / d, dm / 1024, am / 1024 }'
done
echo "(age/dpctl > 1: dpctl is faster; each rounds' raw figures: $work/*.times, removed on exit)"
