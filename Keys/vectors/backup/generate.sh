#!/bin/sh
# Generates the backup vectors of Keys/backup-format.md §8 (CCTV style: `key: value` lines,
# an empty line, the archive). Needs a built dpctl (DPCTL=…, default .build/debug/dpctl),
# the real age 1.x and python3 (its tarfile module: an independent pax writer for the
# entries a backup never holds). Archives are random (age draws keys and nonces): rerunning
# gives new bytes with the same meaning.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
dpctl=${DPCTL:-$here/../../../.build/debug/dpctl}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# A fixed test identity (published here: it protects nothing).
identity=AGE-SECRET-KEY-1GFPYYSJZGFPYYSJZGFPYYSJZGFPYYSJZGFPYYSJZGFPYYSJZGFPQ4EGAEX
printf '%s\n' "$identity" > "$work/key"; chmod 600 "$work/key"
recipient=$(age-keygen -y "$work/key")

export DPCTL_STORE="$work/store" DPCTL_DEVICE="$work/device" DPCTL_PASSCODE=1234
"$dpctl" init >/dev/null
"$dpctl" set-class completeUnlessOpen / >/dev/null 2>&1 || true
"$dpctl" mkdir docs --class complete
printf 'hello\n' | "$dpctl" put - docs/a.txt
printf 'plain\n' | "$dpctl" put - n --class none
entries='d complete 0 docs; - complete 6 docs/a.txt; - none 6 n'

vector() { # name expect comment file [extra header lines]
    name=$1 expect=$2 comment=$3 file=$4
    shift 4
    { printf 'expect: %s\n' "$expect"; printf 'identity: %s\n' "$identity"
      for line in "$@"; do printf '%s\n' "$line"; done
      printf 'comment: %s\n\n' "$comment"; cat "$file"; } > "$here/$name"
}

"$dpctl" backup create -r "$recipient" -o "$work/ours.age" --quiet
vector dpctl_x25519 success "made by dpctl backup create -r" "$work/ours.age" "entries: $entries"
DPCTL_BACKUP_PASSPHRASE='vector passphrase' "$dpctl" backup create --passphrase --work-factor 10 -o "$work/pass.age" --quiet
vector dpctl_scrypt success "made by dpctl backup create --passphrase (log2 N = 10)" "$work/pass.age" "passphrase: vector passphrase" "entries: $entries"

# The tar the generator (dpctl) wrote, encrypted by the real age.
age -d -i "$work/key" -o "$work/ours.tar" "$work/ours.age"
age -r "$recipient" -o "$work/by-age.age" "$work/ours.tar"
vector age_from_generator_tar success "dpctl's tar, encrypted by the real age -r" "$work/by-age.age" "entries: $entries"

# Damage.
size=$(wc -c < "$work/ours.age")
cp "$work/ours.age" "$work/flip.age"
printf '\001' | dd of="$work/flip.age" bs=1 seek=$((size - 5)) conv=notrunc 2>/dev/null
vector last_chunk_flipped integrityFailure "one byte of the last chunk's tag changed" "$work/flip.age"
head -c $((size - 1)) "$work/ours.age" > "$work/short.age"
vector last_chunk_short integrityFailure "the last byte cut" "$work/short.age"
cat "$work/ours.age" > "$work/long.age"; printf '\000' >> "$work/long.age"
vector trailing_byte integrityFailure "a byte after the last chunk" "$work/long.age"
sed '2s/^-> X25519 ./-> X25519 A/' "$work/ours.age" > "$work/header.age"
vector header_changed integrityFailure "the stanza's share changed: the header MAC fails (or the key does not unwrap)" "$work/header.age"

# Entries a backup never holds, in pax tars written by Python's tarfile, encrypted by age.
/usr/bin/python3 - "$work" <<'PY'
import io, sys, tarfile
work = sys.argv[1]
def tar(name, members):
    with tarfile.open(f"{work}/{name}.tar", "w", format=tarfile.PAX_FORMAT) as out:
        for info, data in members:
            out.addfile(info, io.BytesIO(data) if data is not None else None)
def file(path, data=b"x"):
    info = tarfile.TarInfo(path); info.size = len(data); info.mode = 0o600
    info.pax_headers = {"DATAPROTECTION.class": "none"}
    return info, data
link = tarfile.TarInfo("link"); link.type = tarfile.SYMTYPE; link.linkname = "/etc/passwd"
device = tarfile.TarInfo("dev"); device.type = tarfile.CHRTYPE; device.devmajor = 1; device.devminor = 3
tar("symlink", [file("ok"), (link, None)])
tar("device", [file("ok"), (device, None)])
tar("dotdot", [file("ok"), file("a/../../escape")])
tar("absolute", [file("ok"), file("/etc/cron.d/x")])
tar("plain", [file("ok", b"restored\n")])
PY
for name in symlink device dotdot absolute plain; do age -r "$recipient" -o "$work/$name.age" "$work/$name.tar"; done
vector entry_symlink integrityFailure "a symbolic link (Python tarfile, pax)" "$work/symlink.age"
vector entry_device integrityFailure "a character device (Python tarfile, pax)" "$work/device.age"
vector entry_dotdot integrityFailure "a path climbing out with .. (Python tarfile, pax)" "$work/dotdot.age"
vector entry_absolute integrityFailure "an absolute path (Python tarfile, pax)" "$work/absolute.age"
vector python_pax_tar success "a pax tar written by Python's tarfile (no global header), encrypted by age -r" "$work/plain.age" "entries: - none 9 ok"
