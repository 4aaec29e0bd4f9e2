#!/usr/bin/env python3
"""Generates the known-answer frames of Keys/agent-protocol.md (vectors/agent-protocol.json).

An independent encoder of the agent protocol, written from agent-protocol.md alone (it
shares no code with the Swift sources): frames (§2), fields (§3), requests (§4),
responses (§5), the reply bodies of status, attributes and sql (§6), and the pieces
that sqlStream moves through its socket (§4). Only the Python 3 standard library.

    python3 Keys/vectors/generate_agent.py           # (re)writes agent-protocol.json
    python3 Keys/vectors/generate_agent.py --check   # fails if the file on disk differs
"""

import json
import os
import struct
import sys

# --- §3, fields: every integer big-endian -------------------------------------------

STRING_MAX = 4096
BYTES_MAX = 1 << 20


def u8(value):
    return struct.pack(">B", value)


def u32(value):
    return struct.pack(">I", value)


def u64(value):
    return struct.pack(">Q", value)


def i64(value):
    return struct.pack(">q", value)


def boolean(value):
    return u8(1 if value else 0)


def data(value, limit=BYTES_MAX):
    assert len(value) <= limit
    return u32(len(value)) + value


def string(value, limit=STRING_MAX):
    return data(value.encode("utf-8"), limit)


def optional(value, encode):
    return u8(0) if value is None else u8(1) + encode(value)


MS_MAX = 1 << 52


def ms(value):
    return u64(min(value, MS_MAX))


CLASSES = {None: 0, "complete": 1, "completeUnlessOpen": 2, "completeUntilFirstUserAuthentication": 3,
           "completeWhenUserInactive": 4, "none": 5}
MODES = {"read": 0, "write": 1, "update": 2, "append": 3}
STATES = {"booted": 0, "unlocked": 1, "locked": 2}
NOTIFICATIONS = {"protectedDataWillBecomeUnavailable": 0, "protectedDataDidBecomeAvailable": 1}

# --- §2, frames ---------------------------------------------------------------------

FRAME_MAX = (1 << 20) + 4096


def frame(payload):
    assert 1 <= len(payload) <= FRAME_MAX
    return u32(len(payload)) + payload


# --- §4, requests ---------------------------------------------------------------------

def request(code, *fields):
    return frame(u8(code) + b"".join(fields))


REQUESTS = [
    ("hello, protocol version 1", request(1, u32(1))),
    ("hello, protocol version 2", request(1, u32(2))),
    ("status", request(2)),
    ("unlock with passcode \"1234\"", request(3, optional(b"1234", data))),
    ("bare unlock (no passcode)", request(3, optional(None, data))),
    ("lock", request(4)),
    ("readFile \"a.txt\"", request(5, string("a.txt"))),
    ("writeFile \"a.txt\", class complete, not exclusive, inline \"hi\"",
     request(6, string("a.txt"), u8(CLASSES["complete"]), boolean(False), u8(0), data(b"hi"))),
    ("writeFile \"big\", no class given, exclusive, pieces through the passed descriptor",
     request(6, string("big"), u8(CLASSES[None]), boolean(True), u8(2))),
    ("open \"a.txt\" for update, create, class none",
     request(14, string("a.txt"), u8(MODES["update"]), boolean(True), u8(CLASSES["none"]))),
    ("read 4096 bytes from handle 1 at its offset", request(15, u32(1), optional(None, u64), u32(4096))),
    ("write \"x\" to handle 1 at offset 10", request(16, u32(1), optional(10, u64), data(b"x"))),
    ("setProtection \"docs\" to completeUnlessOpen", request(13, string("docs"), u8(CLASSES["completeUnlessOpen"]))),
    ("changePasscode from \"1234\" to \"5678\"", request(26, data(b"1234"), data(b"5678"))),
    ("watch", request(24)),
    ("sqlStream \"db\", create, class complete, stopping at a failed statement",
     request(31, string("db"), boolean(True), u8(CLASSES["complete"]), boolean(False))),
    ("sqlStream \"log.db\", no create, no class given, going on after a failed statement",
     request(31, string("log.db"), boolean(False), u8(CLASSES[None]), boolean(True))),
    ("backupCreate to two X25519 recipients, with items",
     request(50, u32(2), string("age1ql3z7hjy54pw3hyww5ayyfg7zqgvc7w3j2elw8zmrj2kg5sfn9aqmcac8p"),
             string("age1lggyhqrw2nlhcxprm67z43rta597azn8gknawjehu9d9dl0jq3yqqvfafg"), optional(None, data), u8(0), boolean(True))),
    ("backupCreate to the passphrase \"correct horse\", work factor 18, without items",
     request(50, u32(0), optional(b"correct horse", data), u8(18), boolean(False))),
]

# --- §5, responses ---------------------------------------------------------------------


def failure(code, message, hint=None, retry_ms=None, sqlite_code=None):
    """A failure response's payload (status 1 and its fields)."""
    return (u8(1) + string(code) + string(message) + optional(hint, string) + optional(retry_ms, ms)
            + optional(sqlite_code, u32))


RESPONSES = [
    ("ok, no fields", frame(u8(0))),
    ("failure protectedDataUnavailable \"locked\", no hint, no retry, no SQLite code",
     frame(failure("protectedDataUnavailable", "locked"))),
    ("failure passcodeAttemptsDelayed \"wait\", hint \"later\", retry after 60000 ms",
     frame(failure("passcodeAttemptsDelayed", "wait", "later", 60000))),
    ("descriptorNeeded, 2 MiB", frame(u8(2) + u64(2 << 20))),
    ("event protectedDataWillBecomeUnavailable at 1700000000.5 s",
     frame(u8(3) + u8(NOTIFICATIONS["protectedDataWillBecomeUnavailable"]) + i64(1_700_000_000_500_000_000))),
]

# --- §6, reply bodies ----------------------------------------------------------------------


DEVICE_KEY_KINDS = {None: 0, "file": 1, "tpm": 2}


def status_body(state, passcode_set, failures, next_attempt_ms, auto_lock_ms, auto_lock_in_ms, discard_in_ms,
                available, pid, device_key=None, session=None):
    """§6: the appended fields (device key kind, then the session followed: lock sources and buses
    gone) are written when either is given, as an agent of now sends them."""
    mask = 0
    for name in available:
        mask |= 1 << (CLASSES[name] - 1)
    body = (u8(STATES[state]) + boolean(passcode_set) + u32(failures) + optional(next_attempt_ms, ms)
            + optional(auto_lock_ms, ms) + optional(auto_lock_in_ms, ms) + optional(discard_in_ms, ms)
            + u8(mask) + u32(pid))
    if device_key is None and session is None:
        return body
    body += u8(DEVICE_KEY_KINDS[device_key])
    if session is not None:
        sources, gone = session
        body += u8(len(sources)) + b"".join(string(name) for name in sources)
        body += u8(len(gone)) + b"".join(string(name) for name in gone)
    return body


def attributes_body(kind, size, cls, creation_ns, modification_ns):
    return (u8({"file": 0, "directory": 1}[kind]) + u64(size) + u8(CLASSES[cls])
            + optional(creation_ns, i64) + optional(modification_ns, i64))


def column(name, kind, value=None, text=None, limit=None):
    """One column of a row: name, type, value, SQLite's text. `limit` lifts §3's bounds (a row piece)."""
    limits = {} if limit is None else {"limit": limit}
    encoded = string(name, **limits)
    if kind == "null":
        encoded += u8(0)
    elif kind == "integer":
        encoded += u8(1) + i64(value)
    elif kind == "real":
        encoded += u8(2) + u64(struct.unpack(">Q", struct.pack(">d", value))[0])
    elif kind == "text":
        encoded += u8(3) + data(value.encode("utf-8"), **limits)
    elif kind == "blob":
        encoded += u8(4) + data(value, **limits)
    return encoded + optional(text, lambda t: data(t.encode("utf-8"), **limits))


def rows_body(rows):
    return u32(len(rows)) + b"".join(u32(len(row)) + b"".join(row) for row in rows)


BODIES = [
    ("status", "unlocked, passcode set, no failures, auto-lock every 300000 ms, in 299000 ms; every class "
     "available; pid 4242; device key file",
     status_body("unlocked", True, 0, None, 300_000, 299_000, None, list(CLASSES)[1:], 4242, device_key="file")),
    ("status", "locked inside the grace period, 3 failures, next attempt in 60000 ms, auto-lock never, keys "
     "discarded in 9500 ms; completeUntilFirstUserAuthentication and none available; pid 1; device key tpm",
     status_body("locked", True, 3, 60_000, None, None, 9_500,
                 ["completeUntilFirstUserAuthentication", "none"], 1, device_key="tpm")),
    ("status", "booted, no passcode, nothing available, a delay of 2^52 ms (the largest `ms`); pid 2147483647; "
     "device key a provider of the program's own; following the screensavers, the system bus gone",
     status_body("booted", False, 10, MS_MAX, None, None, None, [], 2**31 - 1,
                 session=(["screensavers (session bus)"], ["system bus"]))),
    ("attributes", "a file of 12 bytes, class complete, created at 1700000000 s, no modification date",
     attributes_body("file", 12, "complete", 1_700_000_000_000_000_000, None)),
    ("attributes", "a directory whose new entries take completeUnlessOpen, size 0, created 1 s before 1970 "
     "(a negative i64), modified at 1700000000.5 s",
     attributes_body("directory", 0, "completeUnlessOpen", -1_000_000_000, 1_700_000_000_500_000_000)),
    ("attributes", "a file of 2^48 bytes, no class given, no dates",
     attributes_body("file", 1 << 48, None, None, None)),
    ("rows", "no rows (a statement that returns none)", rows_body([])),
    ("rows", "one row of five columns: integer -1 (text \"-1\"), real 1e20 (text \"1.0e+20\"), text \"\u00fc\", "
     "blob 01 02 and NULL (no text for either)",
     rows_body([[column("a", "integer", -1, "-1"), column("b", "real", 1e20, "1.0e+20"),
                 column("c", "text", "\u00fc", "\u00fc"), column("d", "blob", b"\x01\x02"), column("e", "null")]])),
    ("rows", "two rows of one column named \"count(*)\": 0 and 9223372036854775807; a column with an empty name "
     "and the empty text",
     rows_body([[column("count(*)", "integer", 0, "0")],
                [column("count(*)", "integer", 2**63 - 1, "9223372036854775807"), column("", "text", "", "")]])),
]

# --- §4, sqlStream: pieces --------------------------------------------------------------------

PIECE_MAX = 1 << 20


def piece(payload):
    """A piece: its u32 length, big-endian like every integer of the protocol, then its bytes."""
    return u32(len(payload)) + payload


END_MARKER = piece(b"")
FAILURE_MARK = b"\xff\xff\xff\xff"

PIECES = [
    ("statements", "one piece of statements, \"SELECT 1;\\n\"", [b"SELECT 1;\n"], piece(b"SELECT 1;\n")),
    ("statements", "a script cut inside a statement, a string and a UTF-8 sequence (\u00e9 is c3 a9), then the "
     "end marker", [b"INSERT INTO t VALUES ('caf\xc3", b"\xa9');\n", b""],
     piece(b"INSERT INTO t VALUES ('caf\xc3") + piece(b"\xa9');\n") + END_MARKER),
    ("statements", "the end marker alone: an empty script", [b""], END_MARKER),
    ("rows", "a piece of one row: column \"1\", integer 1, text \"1\"",
     [rows_body([[column("1", "integer", 1, "1")]])], piece(rows_body([[column("1", "integer", 1, "1")]]))),
    ("rows", "an acknowledgment: a piece of no rows", [rows_body([])], piece(rows_body([]))),
    ("rows", "a row whose column name (5000 bytes) passes string's 4096: bounded by its piece alone",
     [rows_body([[column("x" * 5000, "integer", 7, "7", limit=PIECE_MAX)]])],
     piece(rows_body([[column("x" * 5000, "integer", 7, "7", limit=PIECE_MAX)]]))),
    ("rows", "a failure piece: ff ff ff ff, then the payload of a failure response (sqliteError, SQLite code 1), "
     "then the rows' end marker",
     [FAILURE_MARK + failure("sqliteError", "near \"SELEC\": syntax error", None, None, 1), b""],
     piece(FAILURE_MARK + failure("sqliteError", "near \"SELEC\": syntax error", None, None, 1)) + END_MARKER),
]


def document():
    return {
        "description": "Known-answer frames of the agent protocol, versions 1 and 2 (Keys/agent-protocol.md). "
                       "`frame` is the whole frame in hex: the 4-byte big-endian payload length, then the payload.",
        "requests": [{"name": name, "frame": bytes_.hex()} for name, bytes_ in REQUESTS],
        "responses": [{"name": name, "frame": bytes_.hex()} for name, bytes_ in RESPONSES],
        "bodies": [{"kind": kind, "name": name, "body": body.hex()} for kind, name, body in BODIES],
        "pieces": [{"channel": channel, "name": name, "pieces": [p.hex() for p in payloads], "stream": stream.hex()}
                   for channel, name, payloads, stream in PIECES],
    }


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    if sys.argv[1:] not in ([], ["--check"]):
        sys.exit("usage: generate_agent.py [--check]")
    path = os.path.join(here, "agent-protocol.json")
    content = json.dumps(document(), indent=2, ensure_ascii=False) + "\n"
    try:
        with open(path, encoding="utf-8") as existing:
            same = existing.read() == content
    except FileNotFoundError:
        same = False
    if sys.argv[1:] == ["--check"]:
        if not same:
            sys.exit("generate_agent.py: error: agent-protocol.json differs from the generator")
        print("agent-protocol.json matches")
        return
    if not same:
        with open(path, "w", encoding="utf-8") as out:
            out.write(content)
    print("agent-protocol.json %s" % ("written" if not same else "unchanged"))


if __name__ == "__main__":
    main()
