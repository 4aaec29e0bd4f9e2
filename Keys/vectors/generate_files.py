#!/usr/bin/env python3
"""Generates the protected-file and file-name vectors of Keys/file-format.md.

An independent implementation of the protected-file format, the store's
encrypted names and the `dpdir` file, written from file-format.md alone (it
shares no code with the Swift sources). The libsodium primitives and the
deterministic inputs come from generate.py, the key-hierarchy generator,
which is itself written from key-hierarchy.md.

    python3 Keys/vectors/generate_files.py           # (re)writes files/, journals/, names/, places/, identity/
    python3 Keys/vectors/generate_files.py --check   # fails if a vector on disk differs

Every key, nonce and plaintext is derived from a fixed name, so running the
script again reproduces the vectors byte for byte.
"""

import base64
import ctypes
import os
import struct
import sys
import unicodedata

sys.dont_write_bytecode = True  # no __pycache__ beside the vectors
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import generate as kh  # noqa: E402  (libsodium through ctypes; fixed inputs)

SODIUM = kh.SODIUM
SODIUM.crypto_scalarmult.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p]
blake2b = kh.blake2b
aead_seal = kh.aead_seal
aead_open = kh.aead_open
x25519_base = kh.x25519_base
fixed = kh.fixed
flip = kh.flip


def x25519(secret, public):
    """crypto_scalarmult; None when the result is all zeros (a low-order point)."""
    out = ctypes.create_string_buffer(32)
    if SODIUM.crypto_scalarmult(out, secret, public) != 0:
        return None
    return out.raw


# --- file-format.md, "Labels" ----------------------------------------------------

L_CHUNKS = b"DataProtection v1 file chunks"
L_HEADER = b"DataProtection v1 file header"
L_CLASS_B = b"DataProtection v1 class B file wrap"
L_NAME_SIV = b"DataProtection v1 name siv"
L_NAME = b"DataProtection v1 name"
L_DIRECTORY = b"DataProtection v1 directory"
L_PLACE = b"DataProtection v2 place"


def label_key(key, label):
    """LabelKey(key, label) = BLAKE2b-256(key: key, message: label), no separator, no input."""
    return blake2b(label, key=key)


# --- file-format.md, "Header slot" -----------------------------------------------

SLOT_LEN = 512
REGION_LEN = 2 * SLOT_LEN
AUTH_LEN = 160
OVERHEAD = 24 + 16
DEFAULT_SHIFT = 14
CHUNK = 1 << DEFAULT_SHIFT

CLASSES = {
    "complete": 1,
    "completeUnlessOpen": 2,
    "completeUntilFirstUserAuthentication": 3,
    "completeWhenUserInactive": 4,
    "none": 5,
}
CLASS_B = CLASSES["completeUnlessOpen"]


class Header:
    def __init__(self, cls, file_id, generation, length, allocated, ctime, eph, nonce, wrapped,
                 shift=DEFAULT_SHIFT, magic=b"DPFH", version=1, reserved=0):
        self.cls, self.file_id, self.generation, self.length = cls, file_id, generation, length
        self.allocated, self.ctime, self.eph, self.nonce, self.wrapped = allocated, ctime, eph, nonce, wrapped
        self.shift, self.magic, self.version, self.reserved = shift, magic, version, reserved

    def copy(self, **changes):
        h = Header(self.cls, self.file_id, self.generation, self.length, self.allocated, self.ctime,
                   self.eph, self.nonce, self.wrapped, self.shift, self.magic, self.version, self.reserved)
        for key, value in changes.items():
            setattr(h, key, value)
        return h

    def authenticated(self):
        data = (self.magic + bytes([self.version, self.cls, self.shift, self.reserved]) + self.file_id
                + struct.pack("<QQQq", self.generation, self.length, self.allocated, self.ctime)
                + self.eph + self.nonce + self.wrapped)
        assert len(data) == AUTH_LEN
        return data

    def slot(self, mac_key):
        data = self.authenticated()
        return data + blake2b(data, key=mac_key) + bytes(SLOT_LEN - AUTH_LEN - 32)


def wrap_ad(cls, shift, file_id, eph):
    """"DPFH" || 0x01 || class || chunk shift || 0x00 || file id || ephemeral public key (56 bytes)."""
    return b"DPFH" + bytes([1, cls, shift, 0]) + file_id + eph


def class_b_wrapping_key(shared, eph_public, class_public, with_class_public=True):
    message = L_CLASS_B + b"\x00" + eph_public + (class_public if with_class_public else b"")
    return blake2b(message, key=shared)


def chunk_ad(file_id, index, big_endian=False):
    return b"DPFC" + file_id + struct.pack(">Q" if big_endian else "<Q", index)


def records_for(length, shift=DEFAULT_SHIFT):
    return (length + (1 << shift) - 1) >> shift


def stride(shift=DEFAULT_SHIFT):
    return (1 << shift) + OVERHEAD


def physical_size(length, shift=DEFAULT_SHIFT):
    count = records_for(length, shift)
    if count == 0:
        return REGION_LEN
    return REGION_LEN + (count - 1) * stride(shift) + (length - ((count - 1) << shift)) + OVERHEAD


def plaintext(name, length):
    """Fixed pseudo-random plaintext: BLAKE2b-512 blocks of (name, counter)."""
    out = bytearray()
    counter = 0
    while len(out) < length:
        out += blake2b(("%s/plaintext/%d" % (name, counter)).encode(), length=64)
        counter += 1
    return bytes(out[:length])


CREATION_TIME = 1_763_000_000_123_456_789  # nanoseconds since the Unix epoch


class Keys:
    """The class keys a vector's reader holds."""

    def __init__(self, name):
        self.name = name
        self.symmetric = fixed(name + "/class key")
        self.b_secret = fixed(name + "/class B secret")
        self.b_public = x25519_base(self.b_secret)


class ProtectedFile:
    """One protected file: its key, id and wrap, all fixed by `name`."""

    def __init__(self, name, cls_name, keys, shift=DEFAULT_SHIFT):
        self.name, self.cls, self.keys, self.shift = name, CLASSES[cls_name], keys, shift
        self.cls_name = cls_name
        self.file_key = fixed(name + "/file key")
        self.file_id = fixed(name + "/file id", 16)
        self.chunk_key = label_key(self.file_key, L_CHUNKS)
        self.mac_key = label_key(self.file_key, L_HEADER)
        self.nonce_counter = 0
        self.wrap()

    def wrap(self, cls=None, nonce_name="wrap nonce"):
        """Wraps the file key for class `cls` (default: the file's own); sets eph, nonce, wrapped."""
        cls = self.cls if cls is None else cls
        self.nonce = fixed("%s/%s/%d" % (self.name, nonce_name, cls), 24)
        if cls == CLASS_B:
            eph_secret = fixed("%s/ephemeral secret/%d" % (self.name, cls))
            self.eph = x25519_base(eph_secret)
            shared = x25519(eph_secret, self.keys.b_public)
            key = class_b_wrapping_key(shared, self.eph, self.keys.b_public)
        else:
            self.eph = bytes(32)
            key = self.keys.symmetric
        self.wrapped = aead_seal(key, self.nonce, self.file_key, wrap_ad(cls, self.shift, self.file_id, self.eph))
        return cls

    def header(self, generation, length, allocated, cls=None):
        return Header(self.cls if cls is None else cls, self.file_id, generation, length, allocated,
                      CREATION_TIME, self.eph, self.nonce, self.wrapped, shift=self.shift)

    def record(self, index, chunk, key=None, big_endian=False):
        """nonce || ciphertext || tag; a fresh (fixed) nonce for every seal."""
        self.nonce_counter += 1
        nonce = fixed("%s/record nonce/%d" % (self.name, self.nonce_counter), 24)
        return nonce + aead_seal(key or self.chunk_key, nonce, chunk, chunk_ad(self.file_id, index, big_endian))

    def records(self, content):
        size = 1 << self.shift
        return [self.record(i, content[i * size:(i + 1) * size]) for i in range(records_for(len(content), self.shift))]

    def image(self, slot0, slot1, records):
        """The file: two slots (a Header, or raw 512 bytes, or None for zeros), then the records in place."""
        def encode(slot):
            if slot is None:
                return bytes(SLOT_LEN)
            if isinstance(slot, Header):
                return slot.slot(self.mac_key)
            assert len(slot) == SLOT_LEN
            return slot
        data = bytearray(encode(slot0) + encode(slot1))
        items = records.items() if isinstance(records, dict) else enumerate(records)
        for index, record in sorted(items):
            offset = REGION_LEN + index * stride(self.shift)
            assert len(data) <= offset
            data += bytes(offset - len(data)) + record
        return bytes(data)

    def fresh(self, content):
        """What a whole-file write produces: generation 1 in slot 0, slot 1 never written."""
        records = self.records(content)
        header = self.header(1, len(content), len(records))
        return self.image(header, None, records), header, records


def open_file(data, keys):
    """The reader of file-format.md §7: (plaintext, slot index) or the failing step's name."""
    if len(data) < REGION_LEN:
        return "parse"
    candidates = []
    for index in (0, 1):
        parsed = parse_slot(data[index * SLOT_LEN:(index + 1) * SLOT_LEN])
        if parsed is not None:
            candidates.append((index, parsed))
    if not candidates:
        return "parse"
    candidates.sort(key=lambda c: -c[1][0].generation)
    step = None
    for index, (header, mac) in candidates:
        file_key = unwrap(header, keys)
        if file_key is None:
            step = "unwrap"
            continue
        if blake2b(header.authenticated(), key=label_key(file_key, L_HEADER)) != mac:
            step = "mac"
            continue
        size = stride(header.shift)
        at_rest = header.allocated == records_for(header.length, header.shift)
        limit = physical_size(header.length, header.shift) if at_rest else REGION_LEN + header.allocated * size
        if not (physical_size(header.length, header.shift) <= len(data) <= limit):
            step = "size"
            continue
        chunk_key = label_key(file_key, L_CHUNKS)
        out = b""
        count = records_for(header.length, header.shift)
        for i in range(count):
            start = REGION_LEN + i * size
            clen = min(1 << header.shift, header.length - (i << header.shift))
            record = data[start:start + clen + OVERHEAD]
            chunk = aead_open(chunk_key, record[:24], record[24:], chunk_ad(header.file_id, i))
            if chunk is None:
                return "chunk"
            out += chunk
        return out, index, header.generation
    return step


def parse_slot(slot):
    if slot[0:4] != b"DPFH" or slot[4] != 1 or slot[5] not in CLASSES.values():
        return None
    shift = slot[6]
    if not 12 <= shift <= 20 or slot[7] != 0:
        return None
    generation, length, allocated, ctime = struct.unpack("<QQQq", slot[24:56])
    if allocated > (2**63 - 1 - REGION_LEN) // stride(shift):
        return None
    if records_for(length, shift) > allocated:
        return None
    header = Header(slot[5], slot[8:24], generation, length, allocated, ctime, slot[56:88], slot[88:112],
                    slot[112:160], shift=shift)
    return header, slot[160:192]


def unwrap(header, keys):
    ad = wrap_ad(header.cls, header.shift, header.file_id, header.eph)
    if header.cls == CLASS_B:
        shared = x25519(keys.b_secret, header.eph)
        if shared is None:
            return None
        key = class_b_wrapping_key(shared, header.eph, keys.b_public)
    else:
        key = keys.symmetric
    return aead_open(key, header.nonce, header.wrapped, ad)


# --- vector files ---------------------------------------------------------------

VECTORS = {}


def vector(path, fields, payload):
    assert path not in VECTORS, path
    lines = []
    for key, value in fields:
        line = "%s: %s" % (key, value) if value != "" else key + ":"
        assert "\n" not in line
        lines.append(line)
    VECTORS[path] = ("\n".join(lines) + "\n\n").encode("utf-8") + payload


def key_fields(cls_name, keys):
    if CLASSES[cls_name] == CLASS_B:
        return [("class-b-secret", keys.b_secret.hex()), ("class-b-public", keys.b_public.hex())]
    return [("class-key", keys.symmetric.hex())]


def file_ok(name, description, f, payload, content, slot, generation, keys=None):
    keys = keys or f.keys
    result = open_file(payload, keys)
    assert isinstance(result, tuple), (name, result)
    assert result == (content, slot, generation), (name, result[1:], slot, generation)
    fields = [("expect", "success"), ("description", description), ("class", f.cls_name)]
    fields += key_fields(f.cls_name, keys)
    fields += [("current-slot", str(slot)), ("generation", str(generation)), ("plaintext", content.hex())]
    vector("files/" + name, fields, payload)


def file_bad(name, description, f, payload, step, keys=None):
    keys = keys or f.keys
    result = open_file(payload, keys)
    assert result == step, (name, result, step)
    fields = [("expect", "integrityFailure"), ("description", description), ("class", f.cls_name)]
    fields += key_fields(f.cls_name, keys)
    fields.append(("fails-at", step))
    vector("files/" + name, fields, payload)


def replace(data, offset, new):
    return data[:offset] + new + data[offset + len(new):]


def file_vectors():
    keys = Keys("file vectors")
    other_keys = Keys("another device")
    C = "completeUntilFirstUserAuthentication"

    # --- sizes, class C --------------------------------------------------------
    sizes = [
        ("empty", 0, "an empty file: the two header slots and no record (1024 bytes)"),
        ("one_byte", 1, "1 byte: one short record of 41 bytes"),
        ("one_chunk", CHUNK, "exactly one chunk (16384 bytes): one full record, no empty record after it"),
        ("one_chunk_plus_one", CHUNK + 1, "16385 bytes: a full record and a 41-byte last record"),
        ("three_chunks_partial", 3 * CHUNK + 1000, "3 full chunks and 1000 bytes: 4 records, the last short"),
    ]
    files = {}
    for name, length, description in sizes:
        f = ProtectedFile("size " + name, C, keys)
        content = plaintext(name, length)
        image, header, records = f.fresh(content)
        assert len(image) == physical_size(length)
        file_ok(name, description + "; generation 1 in slot 0, slot 1 never written (zeros)",
                f, image, content, 0, 1)
        files[name] = (f, content, image, header, records)

    # --- every class -------------------------------------------------------------
    for cls_name, label in [("complete", "A"), ("completeUnlessOpen", "B"), ("completeWhenUserInactive", "CX"),
                            ("none", "D")]:
        f = ProtectedFile("class " + label, cls_name, keys)
        content = plaintext("class " + label, 1000)
        image, _, _ = f.fresh(content)
        file_ok("class_" + label.lower(), "class %s (%s), 1000 bytes" % (label, cls_name), f, image, content, 0, 1)
        files["class " + label] = (f, content, image)
    for name, length in [("class_b_empty", 0), ("class_b_one_chunk_plus_one", CHUNK + 1)]:
        f = ProtectedFile(name, "completeUnlessOpen", keys)
        content = plaintext(name, length)
        image, _, _ = f.fresh(content)
        file_ok(name, "class B (completeUnlessOpen), %d bytes: the file key is wrapped through X25519" % length,
                f, image, content, 0, 1)

    f12 = ProtectedFile("chunk shift 12", C, keys, shift=12)
    content = plaintext("chunk shift 12", 10000)
    image, _, _ = f12.fresh(content)
    assert len(image) == REGION_LEN + 2 * (4096 + 40) + (10000 - 8192) + 40
    file_ok("chunk_shift_12", "4 KiB chunks (shift 12), 10000 bytes: readers take the chunk size from the header",
            f12, image, content, 0, 1)

    # --- histories with two valid slots -----------------------------------------
    # A whole-file write of one chunk, then a handle appends 3616 bytes and syncs:
    # generation 2 (slot 1) allocates the second record with the length unchanged,
    # the record is written in place, generation 3 (slot 0) commits the length.
    g = ProtectedFile("growth", C, keys)
    full = plaintext("growth", CHUNK + 3616)
    first = full[:CHUNK]
    r0 = g.record(0, first)
    r1 = g.record(1, full[CHUNK:])
    gen2 = g.header(2, CHUNK, 2)
    gen3 = g.header(3, CHUNK + 3616, 2)
    grown = g.image(gen3, gen2, [r0, r1])
    file_ok("two_slots_newest_wins",
            "slot 0 holds generation 3 (20000 bytes), slot 1 generation 2 (16384 bytes, 2 records allocated): "
            "the newest slot that authenticates is current", g, grown, full, 0, 3)
    file_ok("newest_slot_mac_corrupted",
            "as two_slots_newest_wins, with one bit of slot 0's MAC flipped: the reader falls back to generation 3's "
            "predecessor in slot 1 and reads its 16384 bytes (a corrupted newest slot is not detected as such)",
            g, flip(grown, AUTH_LEN + 5), first, 1, 2)
    torn = grown[:100] + bytes(SLOT_LEN - 100) + grown[SLOT_LEN:]
    file_ok("newest_slot_torn",
            "as two_slots_newest_wins, with slot 0 zero from byte 100 on (a torn header write): slot 1 is current",
            g, torn, first, 1, 2)
    gen1 = g.header(1, CHUNK, 1)
    interrupted = g.image(gen1, gen2, [r0, r1])
    file_ok("interrupted_growth_extension_tolerated",
            "a growth interrupted before its commit: slot 1 (generation 2) allocates 2 records for 16384 bytes and "
            "the uncommitted second record is on disk; the extra bytes are inside the allocation and ignored",
            g, interrupted, first, 1, 2)
    file_ok("truncated_after_growth_falls_back",
            "two_slots_newest_wins without its last 100 bytes: generation 3 fails the size check, so generation 2 "
            "(16384 bytes, 2 allocated) is current; a truncation right after a growth is not detected",
            g, grown[:-100], first, 1, 2)

    # A class change C -> A: the new wrap goes to the other slot, then over the old one.
    k = ProtectedFile("class change", C, keys)
    content = plaintext("class change", 1000)
    (rec,) = k.records(content)
    old = k.header(1, 1000, 1)
    k.wrap(CLASSES["complete"], nonce_name="rewrap nonce")
    new2 = k.header(2, 1000, 1, cls=CLASSES["complete"])
    new3 = k.header(3, 1000, 1, cls=CLASSES["complete"])
    k.cls_name = "complete"  # the class of the current header
    file_ok("class_change_interrupted",
            "a class change C -> A interrupted after its first header write: slot 1 (generation 2, class A) is "
            "current, slot 0 still holds the class C wrap (generation 1)", k, k.image(old, new2, [rec]),
            content, 1, 2)
    changed = k.image(new3, new2, [rec])
    file_ok("class_changed", "after a class change C -> A: both slots class A (generations 3 and 2), the content "
            "untouched", k, changed, content, 0, 3)

    # --- tolerated or undetected by design -------------------------------------
    f, content, image, _, _ = files["one_chunk_plus_one"]
    file_bad("extended_one_byte_partial_last_record",
             "one_chunk_plus_one with a zero byte appended: at rest (2 records allocated, 2 needed) the size must be exact",
             f, image + b"\x00", "size")
    f, content, image = files["class A"]
    file_ok("slot_padding_flipped", "class_a with one bit of slot 0's zero padding (byte 300) flipped: "
            "the padding is not authenticated and readers ignore it", f, flip(image, 300), content, 0, 1)

    # A chunk of an older version of the same file: records are bound to the file
    # id and index, not to a generation, so splicing is not detected.
    v = ProtectedFile("versions", C, keys)
    v1 = plaintext("versions v1", CHUNK + 100)
    v2 = plaintext("versions v2", CHUNK + 100)
    v1r = v.records(v1)
    v2r = v.records(v2)
    v2image = v.image(v.header(1, len(v1), 2), v.header(2, len(v2), 2), v2r)
    file_ok("version_two", "a file rewritten in place through a handle: generation 2 (slot 1) over generation 1, "
            "both chunks replaced", v, v2image, v2, 1, 2)
    spliced = v.image(v.header(1, len(v1), 2), v.header(2, len(v2), 2), [v1r[0], v2r[1]])
    file_ok("record_from_older_version",
            "version_two with record 0 put back from generation 1: NOT detected (records carry no generation); "
            "the content is a mixture that was never written", v, spliced, v1[:CHUNK] + v2[CHUNK:], 1, 2)

    # --- integrity failures: the header ----------------------------------------
    f, content, image = files["class A"]
    header_flips = [
        ("header_magic", 0, 0x01, "parse", "bit 0 of the magic flipped (\"EPFH\")"),
        ("header_version", 4, 0x02, "parse", "version 3 instead of 1"),
        ("header_class", 5, 0x02, "unwrap", "class 1 (A) flipped to 3 (C): the wrap's associated data names the class"),
        ("header_chunk_shift", 6, 0x01, "unwrap", "chunk shift 14 flipped to 15 (still in range): bound by the wrap"),
        ("header_chunk_shift_out_of_range", 6, 0x04, "parse", "chunk shift 14 flipped to 10 (below 12)"),
        ("header_reserved", 7, 0x01, "parse", "the reserved byte 7 set to 1"),
        ("header_file_id", 8 + 3, 0x10, "unwrap", "one bit of the file id flipped: bound by the wrap"),
        ("header_generation", 24, 0x04, "mac", "generation 1 flipped to 5: only the MAC covers it"),
        ("header_length", 32, 0x01, "mac", "length 1000 flipped to 1001 (still one record): only the MAC covers it"),
        ("header_length_exceeds_allocation", 32 + 2, 0x10, "parse",
         "length bit 20 set: 1049576 bytes need 65 records, 1 is allocated"),
        ("header_allocated", 40, 0x02, "mac", "allocated records 1 flipped to 3: only the MAC covers it"),
        ("header_creation_time", 48 + 6, 0x01, "mac", "one bit of the creation time flipped"),
        ("header_wrap_nonce", 88 + 23, 0x80, "unwrap", "one bit of the wrap nonce flipped"),
        ("header_wrapped_key", 112 + 5, 0x01, "unwrap", "one bit of the wrapped key's ciphertext flipped"),
        ("header_wrapped_key_tag", 159, 0x80, "unwrap", "one bit of the wrapped key's tag flipped"),
        ("header_mac", 160 + 31, 0x80, "mac", "one bit of the MAC flipped"),
    ]
    for name, offset, bit, step, description in header_flips:
        file_bad(name, "class_a, slot 0: " + description, f, flip(image, offset, bit), step)
    d, dcontent, dimage = files["class D"]
    file_bad("header_class_invalid", "class_d, slot 0: class 5 flipped to 7, not a class", d,
             flip(dimage, 5, 0x02), "parse")
    file_bad("header_length_max",
             "class_a, slot 0: length 2^64 - 1 (unauthenticated): a reader must not overflow computing its records",
             f, replace(image, 32, b"\xff" * 8), "parse")
    huge = f.header(1, 1000, 2**62)
    file_bad("header_allocated_huge",
             "class_a, slot 0 rewritten and MACed with 2^62 allocated records: beyond any addressable file",
             f, replace(image, 0, huge.slot(f.mac_key)), "parse")

    b, bcontent, bimage = files["class B"]
    file_bad("header_ephemeral_key", "class_b, slot 0: one bit of the ephemeral public key flipped", b,
             flip(bimage, 56 + 9), "unwrap")
    file_bad("header_ephemeral_key_low_order",
             "class_b, slot 0: the ephemeral public key replaced by zeros (a low-order point; X25519 fails)", b,
             replace(bimage, 56, bytes(32)), "unwrap")
    file_bad("class_b_other_device", "class_b read with another device's class B key pair", b, bimage, "unwrap",
             keys=other_keys)
    bb = ProtectedFile("class B no public in kdf", "completeUnlessOpen", keys)
    eph_secret = fixed("class B no public in kdf/ephemeral secret")
    bb.eph = x25519_base(eph_secret)
    wk = class_b_wrapping_key(x25519(eph_secret, keys.b_public), bb.eph, keys.b_public, with_class_public=False)
    bb.wrapped = aead_seal(wk, bb.nonce, bb.file_key, wrap_ad(CLASS_B, DEFAULT_SHIFT, bb.file_id, bb.eph))
    bcontent2 = plaintext("class B no public in kdf", 100)
    file_bad("class_b_kdf_without_class_public",
             "class B wrapped with BLAKE2b(shared, label || 0x00 || ephemeral public) (the class B public key "
             "left out of the wrapping-key derivation)", bb, bb.fresh(bcontent2)[0], "unwrap")
    file_bad("wrong_class_key", "class_a read with another class key", f, image, "unwrap", keys=other_keys)
    for label in ("CX", "D"):
        g_, _, g_image = files["class " + label]
        file_bad("wrong_class_key_" + label.lower(), "class_%s read with another class key" % label.lower(), g_,
                 g_image, "unwrap", keys=other_keys)
    c_file, _, c_image, _, _ = files["one_byte"]
    file_bad("wrong_class_key_c", "one_byte (class C) read with another class key", c_file, c_image, "unwrap",
             keys=other_keys)

    # MAC and chunk keys derived as key-hierarchy.md's KDF would (label || 0x00): wrong.
    m = ProtectedFile("mac key with separator", C, keys)
    mcontent = plaintext("mac key with separator", 100)
    (mrec,) = m.records(mcontent)
    sep_mac = blake2b(L_HEADER + b"\x00", key=m.file_key)
    file_bad("mac_key_with_separator",
             "slot MAC keyed with BLAKE2b(file key, label || 0x00) instead of BLAKE2b(file key, label)",
             m, m.image(m.header(1, 100, 1).slot(sep_mac), None, [mrec]), "mac")
    file_bad("mac_under_file_key", "slot MAC keyed with the file key itself instead of the header key",
             m, m.image(m.header(1, 100, 1).slot(m.file_key), None, [mrec]), "mac")
    sep_chunk = blake2b(L_CHUNKS + b"\x00", key=m.file_key)
    file_bad("chunk_key_with_separator",
             "the record sealed with BLAKE2b(file key, label || 0x00) instead of BLAKE2b(file key, label)",
             m, m.image(m.header(1, 100, 1), None, [m.record(0, mcontent, key=sep_chunk)]), "chunk")

    # --- integrity failures: records, size --------------------------------------
    f, content, image, header, records = files["one_chunk_plus_one"]
    r1 = REGION_LEN + stride()
    file_bad("chunk_nonce", "one_chunk_plus_one: one bit of record 0's nonce flipped", f,
             flip(image, REGION_LEN + 7), "chunk")
    file_bad("chunk_ciphertext", "one_chunk_plus_one: one bit of record 0's ciphertext flipped", f,
             flip(image, REGION_LEN + 24 + 9000), "chunk")
    file_bad("chunk_tag", "one_chunk_plus_one: one bit of the last record's tag flipped", f,
             flip(image, len(image) - 1, 0x40), "chunk")
    file_bad("chunk_ad_big_endian_index",
             "one_chunk_plus_one with record 1 sealed under \"DPFC\" || file id || index as big-endian u64",
             f, image[:r1] + f.record(1, content[CHUNK:], big_endian=True), "chunk")
    file_bad("truncated_at_chunk_boundary", "one_chunk_plus_one without its last record (1024 + 16424 bytes)",
             f, image[:r1], "size")
    file_bad("truncated_mid_record", "one_chunk_plus_one cut in the middle of record 0 (at 1024 + 8000)",
             f, image[:REGION_LEN + 8000], "size")
    file_bad("truncated_to_header", "one_chunk_plus_one cut to its 1024 header bytes", f, image[:REGION_LEN],
             "size")
    file_bad("extended_whole_record", "one_chunk_plus_one with a whole record (16424 bytes) appended: "
             "beyond the 2 allocated records", f, image + f.record(2, plaintext("extra", CHUNK)), "size")
    file_bad("truncated_header_region", "only the first 1000 bytes of one_chunk_plus_one: no complete slot pair",
             f, image[:1000], "parse")
    file_bad("empty_file", "a file of 0 bytes", f, b"", "parse")
    file_bad("no_valid_slot", "one_chunk_plus_one with both slots zero", f, bytes(REGION_LEN) + image[REGION_LEN:],
             "parse")

    o, ocontent, oimage, _, orecords = files["one_chunk"]
    file_bad("extended_one_byte_full_last_record",
             "one_chunk with a zero byte appended: its single allocated record is full, so the byte is beyond it",
             o, oimage + b"\x00", "size")
    e = files["empty"]
    file_bad("extended_empty_file", "empty with a zero byte appended: nothing is allocated", e[0], e[2] + b"\x00",
             "size")

    t, tcontent, timage, _, trecords = files["three_chunks_partial"]
    swapped = t.image(t.header(1, len(tcontent), 4), None, [trecords[1], trecords[0], trecords[2], trecords[3]])
    file_bad("records_swapped", "three_chunks_partial with records 0 and 1 exchanged: the index is in each "
             "record's associated data", t, swapped, "chunk")

    # Another file of the same class, device and length.
    other = ProtectedFile("another file", C, keys)
    other_content = plaintext("another file", CHUNK + 1)
    other_image, _, other_records = other.fresh(other_content)
    file_bad("record_from_another_file", "one_chunk_plus_one with record 0 taken from another file of the same "
             "length, class and device: the file id is in each record's associated data",
             f, image[:REGION_LEN] + other_records[0] + image[r1:], "chunk")
    file_bad("header_from_another_file", "one_chunk_plus_one with the 1024 header bytes of another file of the same "
             "length, class and device: the header authenticates, the records do not",
             f, other_image[:REGION_LEN] + image[REGION_LEN:], "chunk")


# --- file-format.md, "The journal" (§9) ---------------------------------------------

def journal(f, base, sequence, length, allocated, entries, version=3, file_id=None):
    """One journal (§9.1): its fields, its entries (index, sealed record), the MAC. Version 3's
    MAC leaves each record's ciphertext out (its nonce and tag kept); versions 1 and 2 MAC all
    of it (version 1 has no sequence number)."""
    fields = (b"DPFJ" + bytes([version]) + (file_id or f.file_id) + struct.pack("<Q", base)
              + (struct.pack("<I", sequence) if version >= 2 else b"")
              + struct.pack("<QQI", length, allocated, len(entries)))
    body, authenticated = fields, fields
    for index, record in entries:
        assert len(record) >= OVERHEAD
        body += struct.pack("<QI", index, len(record)) + record
        authenticated += struct.pack("<QI", index, len(record)) + record[:24] + record[-16:]
    return body + blake2b(authenticated if version >= 3 else body, key=f.mac_key)


def journal_ok(name, description, f, payload, journal_file, content):
    fields = [("expect", "success"), ("description", description), ("class", f.cls_name)]
    fields += key_fields(f.cls_name, f.keys)
    fields += [("journal", journal_file.hex()), ("plaintext", content.hex())]
    vector("journals/" + name, fields, payload)


def journal_bad(name, description, f, payload, journal_file):
    fields = [("expect", "integrityFailure"), ("description", description), ("class", f.cls_name)]
    fields += key_fields(f.cls_name, f.keys)
    fields += [("journal", journal_file.hex())]
    vector("journals/" + name, fields, payload)


def journal_vectors():
    """A file of 16,385 bytes (generation 1, slot 0) with a journal beside it: what a reader
    makes of it (§9.2), through recovery, as the plaintext it then reads."""
    keys = Keys("journal vectors")
    f = ProtectedFile("journaled file", "completeUntilFirstUserAuthentication", keys)
    old = plaintext("journaled file", CHUNK + 1)
    image, header, records = f.fresh(old)
    # Commit 1 overwrites chunk 0; commit 2 regrows chunk 1 to a whole chunk and adds chunk 2.
    first = plaintext("journaled file/commit 1", CHUNK)
    after1 = first + old[CHUNK:]
    after2 = after1 + plaintext("journaled file/commit 2", 2 * CHUNK + 100 - len(after1))
    j1 = journal(f, 1, 1, len(after1), 2, [(0, f.record(0, first))])
    grown = [(1, f.record(1, after2[CHUNK:2 * CHUNK])), (2, f.record(2, after2[2 * CHUNK:]))]
    j2 = journal(f, 1, 2, len(after2), 3, grown)
    record_at = 53 + 12  # the first entry's record in a journal
    journal_ok("uncommitted", "one journal on the header it was written against (generation 1): redone, "
               "chunk 0 overwritten", f, image, j1, after1)
    journal_ok("chain", "a chain of two journals on generation 1: the overwrite, then a growth that regrows "
               "record 1 and adds record 2 (length 32,868, 3 records)", f, image, j1 + j2, after2)
    committed_header = f.header(2, len(after2), 3)
    committed = f.image(header, committed_header, records)
    journal_ok("committed", "the chain with the header that committed it (generation 2, its length and "
               "allocation) in slot 1 and none of its records in place: the records are redone", f, committed,
               j1 + j2, after2)
    journal_ok("stale", "a journal on generation 5 beside a file at generation 1: stale, ignored", f, image,
               journal(f, 5, 1, len(after1), 2, [(0, f.record(0, first))]), old)
    journal_ok("another_file", "a journal naming another file id: ignored", f, image,
               journal(f, 1, 1, len(after1), 2, [(0, f.record(0, first))], file_id=bytes(16)), old)
    journal_ok("ciphertext_flipped", "one bit of the record's ciphertext flipped: the MAC (which leaves the "
               "ciphertext out) matches, the record does not open: torn, ignored", f, image,
               flip(j1, record_at + 24 + 100), old)
    journal_ok("tag_flipped", "one bit of the record's tag flipped: the MAC fails: torn, ignored", f, image,
               flip(j1, len(j1) - 32 - 1), old)
    journal_ok("mac_flipped", "one bit of the MAC flipped: ignored", f, image, flip(j1, len(j1) - 1), old)
    journal_ok("chain_second_torn", "the chain with a ciphertext bit of the second journal's first record "
               "flipped: the chain ends after the first journal", f, image,
               j1 + flip(j2, record_at + 24 + 7), after1)
    journal_ok("trailing_bytes", "the chain followed by the tail of an older, longer chain: ignored", f, image,
               j1 + j2 + j2[:200], after2)
    v2 = journal(f, 1, 1, len(after1), 2, [(0, f.record(0, first))], version=2)
    journal_ok("version_2", "a version-2 journal (its MAC over the records' ciphertext too): redone", f, image,
               v2, after1)
    journal_ok("version_2_ciphertext_flipped", "a version-2 journal with a ciphertext bit flipped: its MAC "
               "fails: ignored", f, image, flip(v2, record_at + 24 + 100), old)
    journal_ok("version_1", "a version-1 journal (no sequence number): redone, a chain of one", f, image,
               journal(f, 1, 1, len(after1), 2, [(0, f.record(0, first))], version=1), after1)

    # The entry bound (§9.1): 256 entries apply; an authentic journal with 257 is one no writer
    # makes (only the file key makes one), refused when it applies; a torn or stale one is ignored.
    def many(count, base=1):
        """`count` entries: record 0 holds one byte, every other record is empty (40 bytes, it opens)."""
        entries = [(0, f.record(0, b"\x2a"))] + [(i, f.record(i, b"")) for i in range(1, count)]
        return journal(f, base, 1, 1, count, entries)

    journal_ok("entries_256", "a journal of 256 entries, the most one holds (length 1, 256 records allocated; "
               "record 0 holds one byte, the others are empty): redone", f, image, many(256), b"\x2a")
    j257 = many(257)
    journal_bad("entries_257", "an authentic journal of 257 entries on the header it was written against: more "
                "than a journal holds, so it was made with the file key by something other than a writer "
                "(tampering, or a bug): refused, nothing written", f, image, j257)
    journal_ok("entries_257_torn", "the journal of 257 entries with one bit of its MAC flipped: torn, ignored",
               f, image, flip(j257, len(j257) - 1), old)
    journal_ok("entries_257_stale", "an authentic journal of 257 entries on generation 5 beside a file at "
               "generation 1: stale, ignored unapplied", f, image, many(257, base=5), old)


# --- file-format.md, "Names" and "Directories" -----------------------------------

DPDIR_LEN = 118
DPDIR_V1_LEN = 54
ROOT_PARENT = bytes(16)


def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def b64url_decode_canonical(text):
    if not text or any(c not in "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_" for c in text):
        return None
    if len(text) % 4 == 1:
        return None
    try:
        data = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except Exception:
        return None
    return data if b64url(data) == text else None


def encrypt_name(metadata_key, directory_id, name, nonce=None):
    siv = label_key(metadata_key, L_NAME_SIV)
    cipher = label_key(metadata_key, L_NAME)
    if nonce is None:
        nonce = blake2b(directory_id + name, key=siv, length=24)
    return b64url(nonce + aead_seal(cipher, nonce, name, b"DPNM" + directory_id))


def decrypt_name(metadata_key, directory_id, text):
    data = b64url_decode_canonical(text)
    if data is None or len(data) < 40:
        return None
    nonce, sealed = data[:24], data[24:]
    name = aead_open(label_key(metadata_key, L_NAME), nonce, sealed, b"DPNM" + directory_id)
    if name is None or blake2b(directory_id + name, key=label_key(metadata_key, L_NAME_SIV), length=24) != nonce:
        return None
    try:
        name.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return name


def place_tag(metadata_key, kind, entry_id, directory_id, name):
    """§10.2: kind is b"DPPF" (a file) or b"DPPD" (a directory)."""
    return blake2b(kind + entry_id + directory_id + name, key=label_key(metadata_key, L_PLACE))


def dpdir(metadata_key, directory_id, cls, places, mac_key=None, version=2, magic=b"DPDR"):
    body = magic + bytes([version]) + directory_id + bytes([cls]) + b"".join(places)
    return body + blake2b(body, key=mac_key or label_key(metadata_key, L_DIRECTORY))


def dpdir_at(metadata_key, directory_id, cls, parent_id, name, **changes):
    tag = place_tag(metadata_key, b"DPPD", directory_id, parent_id, name)
    return dpdir(metadata_key, directory_id, cls, [tag, tag], **changes)


def decode_dpdir(metadata_key, data):
    """(id, class, places), or None; version 1 (read only to migrate) has no places."""
    if len(data) not in (DPDIR_LEN, DPDIR_V1_LEN):
        return None
    body, mac = data[:-32], data[-32:]
    if blake2b(body, key=label_key(metadata_key, L_DIRECTORY)) != mac:
        return None
    version = 2 if len(data) == DPDIR_LEN else 1
    if body[:4] != b"DPDR" or body[4] != version or body[21] not in (0, *CLASSES.values()):
        return None
    places = [body[22:54], body[54:86]] if version == 2 else []
    return body[5:21], body[21], places


def dpdir_bound(metadata_key, parsed, parent_id, name):
    return place_tag(metadata_key, b"DPPD", parsed[0], parent_id, name) in parsed[2]


def name_fields(name):
    try:
        text = name.decode("utf-8")
    except UnicodeDecodeError:
        return [("name-hex", name.hex())]
    printable = text != "" and text.isascii() and text.isprintable() and text == text.strip()
    return [("name", text)] if printable else [("name-hex", name.hex())]


def name_vector(name, expect, description, metadata_key, directory, name_bytes, payload, step=None,
                place=(ROOT_PARENT, b"")):
    fields = [("expect", expect), ("description", description), ("metadata-key", metadata_key.hex()),
              ("dpdir", directory.hex()), ("dpdir-parent-id", place[0].hex()), ("dpdir-name-hex", place[1].hex())]
    parsed = decode_dpdir(metadata_key, directory)
    if step == "place":
        assert parsed is not None and not dpdir_bound(metadata_key, parsed, *place), name
        fields += [("directory-id", parsed[0].hex()), ("fails-at", step)]
        fields += name_fields(name_bytes)
        vector("names/" + name, fields, payload.encode("ascii"))
        return
    if parsed is not None:
        assert dpdir_bound(metadata_key, parsed, *place), name
    if expect == "success":
        assert parsed is not None
        assert encrypt_name(metadata_key, parsed[0], name_bytes) == payload
        assert decrypt_name(metadata_key, parsed[0], payload) == name_bytes
        fields += [("directory-id", parsed[0].hex()), ("directory-class", str(parsed[1]))]
    else:
        assert step in ("dpdir", "name")
        if step == "dpdir":
            assert parsed is None, name
        else:
            assert parsed is not None and decrypt_name(metadata_key, parsed[0], payload) is None, name
            fields += [("directory-id", parsed[0].hex())]
        fields.append(("fails-at", step))
    fields += name_fields(name_bytes)
    vector("names/" + name, fields, payload.encode("ascii"))


def flip_name(text, byte_offset, bit=0x01):
    data = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    return b64url(flip(data, byte_offset, bit))


def name_vectors():
    key = fixed("name vectors/metadata key")
    root_id = fixed("name vectors/root id", 16)
    docs_id = fixed("name vectors/Documents id", 16)
    root = dpdir_at(key, root_id, 0, ROOT_PARENT, b"")
    docs_place = (root_id, b"Documents")
    docs = dpdir_at(key, docs_id, CLASSES["complete"], *docs_place)

    def ok(name, description, directory, directory_id, plain, place=None):
        payload = encrypt_name(key, directory_id, plain)
        place = place or (docs_place if directory_id == docs_id else (ROOT_PARENT, b""))
        name_vector(name, "success", description, key, directory, plain, payload, place=place)
        return payload

    notes = ok("root_notes", "\"notes.txt\" in the root directory (no class given to it)", root, root_id, b"notes.txt")
    ok("documents_notes", "the same name in another directory (class A by default): another encrypted name",
       docs, docs_id, b"notes.txt")
    ok("one_byte", "the one-byte name \"a\"", root, root_id, b"a")
    uni = unicodedata.normalize("NFC", "Résumé ✓ 履歴書.txt").encode("utf-8")
    ok("unicode", "a non-ASCII name: its exact UTF-8 bytes (NFC here), not normalized by the store", root, root_id, uni)
    nfd = unicodedata.normalize("NFD", uni.decode("utf-8")).encode("utf-8")
    assert nfd != uni
    ok("unicode_nfd", "the same name in NFD: different bytes, a different entry", root, root_id, nfd)
    longest = ("x" * 149).encode()
    long_payload = ok("longest", "a 149-byte name, the longest allowed: 252 characters on disk, 254 with the "
                      "journal suffix .j", root, root_id, longest)
    assert len(long_payload) == 252
    # A name whose encoding uses both '-' and '_' (the URL-safe digits).
    for i in range(1000):
        candidate = ("file-%d" % i).encode()
        encoded = encrypt_name(key, root_id, candidate)
        if "-" in encoded and "_" in encoded:
            urlsafe = ok("urlsafe_alphabet", "a name whose encoding contains both - and _", root, root_id, candidate)
            urlsafe_name = candidate
            break

    def bad(name, description, directory, plain, payload, step="name", place=None):
        place = place or (docs_place if directory in (docs,) else (ROOT_PARENT, b""))
        name_vector(name, "integrityFailure", description, key, directory, plain, payload, step, place=place)

    raw_len = 24 + len(b"notes.txt") + 16
    bad("flipped_nonce", "root_notes with one bit of the synthetic nonce flipped", root, b"notes.txt",
        flip_name(notes, 3))
    bad("flipped_ciphertext", "root_notes with one bit of the ciphertext flipped", root, b"notes.txt",
        flip_name(notes, 24 + 2))
    bad("flipped_tag", "root_notes with one bit of the tag flipped", root, b"notes.txt", flip_name(notes, raw_len - 1))
    bad("other_directory", "root_notes looked up in Documents: the directory id is in the nonce and the "
        "associated data", docs, b"notes.txt", notes)
    bad("truncated", "root_notes without its last character", root, b"notes.txt", notes[:-1])
    bad("padded", "root_notes with base64 padding appended", root, b"notes.txt", notes + "=" * (-len(notes) % 4 or 4))
    standard = urlsafe.replace("-", "+").replace("_", "/")
    bad("standard_alphabet", "urlsafe_alphabet written with the standard base64 alphabet (+ and /)", root,
        urlsafe_name, standard)
    # raw_len = 49 bytes -> 66 characters, the last holding 2 unused bits.
    assert raw_len % 3 == 1
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    last = alphabet.index(notes[-1])
    assert last & 0x0F == 0
    noncanonical = notes[:-1] + alphabet[last | 0x01]
    assert base64.urlsafe_b64decode(noncanonical + "==") == base64.urlsafe_b64decode(notes + "==")
    bad("noncanonical_encoding", "root_notes with the unused low bits of its last character set: it decodes to the "
        "same bytes, but only the canonical encoding is the entry", root, b"notes.txt", noncanonical)
    random_nonce = fixed("name vectors/random nonce", 24)
    bad("nonce_not_synthetic", "\"notes.txt\" sealed correctly but under a nonce that is not its synthetic nonce",
        root, b"notes.txt", encrypt_name(key, root_id, b"notes.txt", nonce=random_nonce))
    bad("short", "30 bytes encoded: shorter than a nonce and a tag", root, b"", b64url(fixed("short", 30)))
    bad("not_utf8", "a correctly encrypted name whose bytes are not UTF-8 (0xff)", root, b"\xff",
        encrypt_name(key, root_id, b"\xff"))

    bad("dpdir_flipped_class", "root_notes; the dpdir's class byte flipped (0 -> 1)", flip(root, 21), b"notes.txt",
        notes, "dpdir")
    bad("dpdir_flipped_place", "root_notes; one bit of the dpdir's first place flipped", flip(root, 30),
        b"notes.txt", notes, "dpdir")
    bad("dpdir_flipped_mac", "root_notes; one bit of the dpdir's MAC flipped", flip(root, 117), b"notes.txt", notes,
        "dpdir")
    bad("dpdir_mac_under_metadata_key", "root_notes; the dpdir MACed with the metadata key itself",
        dpdir_at(key, root_id, 0, ROOT_PARENT, b"", mac_key=key), b"notes.txt", notes, "dpdir")
    bad("dpdir_unknown_class", "root_notes; a dpdir with an authentic MAC over class 6",
        dpdir_at(key, root_id, 6, ROOT_PARENT, b""), b"notes.txt", notes, "dpdir")
    bad("dpdir_version_3", "root_notes; a dpdir with an authentic MAC over version 3",
        dpdir_at(key, root_id, 0, ROOT_PARENT, b"", version=3), b"notes.txt", notes, "dpdir")
    bad("dpdir_version_1_places", "root_notes; a 118-byte dpdir with places but version 1",
        dpdir_at(key, root_id, 0, ROOT_PARENT, b"", version=1), b"notes.txt", notes, "dpdir")
    bad("dpdir_truncated", "root_notes; the dpdir without its last byte", root[:-1], b"notes.txt", notes, "dpdir")
    # Places (§10.2, §11.2).
    bad("dpdir_version_1", "root_notes; an authentic version 1 dpdir (54 bytes, no places): it reads, to be "
        "migrated, but binds no place", dpdir(key, root_id, 0, [], version=1), b"notes.txt", notes, "place")
    other = (root_id, b"Other")
    bad("dpdir_other_place", "Documents' dpdir found where \"Other\" is (two directories swapped on disk)", docs,
        b"notes.txt", encrypt_name(key, docs_id, b"notes.txt"), "place", place=other)
    bad("dpdir_other_parent", "Documents' dpdir under another parent (the directory moved on disk)", docs,
        b"notes.txt", encrypt_name(key, docs_id, b"notes.txt"), "place", place=(docs_id, b"Documents"))
    moving = dpdir(key, docs_id, CLASSES["complete"], [place_tag(key, b"DPPD", docs_id, *docs_place),
                                                        place_tag(key, b"DPPD", docs_id, *other)])
    ok("dpdir_moving_old_place", "Documents being moved to \"Other\": its dpdir binds both places; at the old one",
       moving, docs_id, b"notes.txt", place=docs_place)
    ok("dpdir_moving_new_place", "the same dpdir at the new place", moving, docs_id, b"notes.txt", place=other)
    bad("dpdir_file_place", "a dpdir whose places are file tags (DPPF) for its own id and place",
        dpdir(key, docs_id, CLASSES["complete"], [place_tag(key, b"DPPF", docs_id, *docs_place)] * 2), b"notes.txt",
        encrypt_name(key, docs_id, b"notes.txt"), "place", place=docs_place)


def place_vectors():
    """A file's two place records (§4.1, §10.2): the payload is the 1024-byte header region's records,
    record 0 then record 1 (64 bytes); the fields say the file id and the place it is found at."""
    key = fixed("place vectors/metadata key")
    file_id = fixed("place vectors/file id", 16)
    other_id = fixed("place vectors/other file id", 16)
    dir_id = fixed("place vectors/directory id", 16)
    other_dir = fixed("place vectors/other directory id", 16)
    here = (dir_id, b"notes.txt")

    def tag(entry_id, place, kind=b"DPPF"):
        return place_tag(key, kind, entry_id, *place)

    def emit(name, description, records, place, bound):
        assert (tag(file_id, place) in (records[:32], records[32:])) == bound, name
        fields = [("expect", "success" if bound else "integrityFailure"), ("description", description),
                  ("metadata-key", key.hex()), ("file-id", file_id.hex()), ("directory-id", place[0].hex()),
                  ("name-hex", place[1].hex())]
        if not bound:
            fields.append(("fails-at", "place"))
        vector("places/" + name, fields, records)

    emit("at_rest", "\"notes.txt\" in its directory: both records bind it there", tag(file_id, here) * 2, here, True)
    new = (dir_id, b"renamed.txt")
    moving = tag(file_id, here) + tag(file_id, new)
    emit("moving_old_name", "a move to \"renamed.txt\" cut before the rename: record 1 has the new place", moving,
         here, True)
    emit("moving_new_name", "the same move cut after the rename", moving, new, True)
    emit("moved", "after the move: both records bind the new place; the old name no longer", tag(file_id, new) * 2,
         here, False)
    emit("swapped", "the records of \"other.txt\" (same directory): two names swapped on disk",
         tag(file_id, (dir_id, b"other.txt")) * 2, here, False)
    emit("other_directory", "the same name in another directory: the file moved on disk", tag(file_id, (other_dir,
         b"notes.txt")) * 2, here, False)
    emit("other_file", "another file's records for this very place, copied in", tag(other_id, here) * 2, here, False)
    emit("directory_tag", "a directory tag (DPPD) for the file's id and place", tag(file_id, here, b"DPPD") * 2, here,
         False)
    emit("zero_records", "no records (a file written before places, never migrated)", bytes(64), here, False)
    emit("flipped", "record 0 with one bit flipped, record 1 zero", flip(tag(file_id, here), 31) + bytes(32), here,
         False)
    emit("record_1_only", "record 0 zero, record 1 binds: bound", bytes(32) + tag(file_id, here), here, True)
    root_place = (ROOT_PARENT, b"notes.txt")
    emit("root_parent_zero_id", "the root's parent id (16 zero bytes) is never a directory's: bound only at its own "
         "place", tag(file_id, root_place) * 2, here, False)


# --- file-format.md, "The store's identity" (§11.3) ------------------------------------------

IDENTITY_LEN = 21
LAYOUT = 2


def identity_file(store_id, layout=LAYOUT, magic=b"DPST"):
    """`.dpstore` and `store-id` (the same 21 bytes): "DPST" || layout || store id."""
    return magic + bytes([layout]) + store_id


def identity_vectors():
    store_id = fixed("store identity", 16)

    def emit(name, expect, description, payload, layout=None):
        fields = [("expect", expect), ("description", description)]
        if expect == "success":
            fields += [("layout", str(layout)), ("store-id", store_id.hex())]
        vector("identity/" + name, fields, payload)

    good = identity_file(store_id)
    assert len(good) == IDENTITY_LEN
    emit("layout_2", "success", "a store of layout 2 (places): as this version writes it", good, 2)
    emit("layout_1", "success", "a store of layout 1 (before places), still read", identity_file(store_id, 1), 1)
    emit("layout_3", "integrityFailure", "layout 3: from a later version, refused rather than guessed",
         identity_file(store_id, 3))
    emit("layout_255", "integrityFailure", "layout 255", identity_file(store_id, 255))
    emit("layout_0", "integrityFailure", "layout 0: no such layout", identity_file(store_id, 0))
    emit("wrong_magic", "integrityFailure", "the magic \"DPSX\"", identity_file(store_id, magic=b"DPSX"))
    emit("truncated", "integrityFailure", "20 bytes", good[:-1])
    emit("extended", "integrityFailure", "22 bytes", good + b"\x00")
    emit("empty_file", "integrityFailure", "an empty file", b"")


# --- main --------------------------------------------------------------------------

def main():
    here = os.path.dirname(os.path.abspath(__file__))
    check = sys.argv[1:] == ["--check"]
    if sys.argv[1:] not in ([], ["--check"]):
        sys.exit("usage: generate_files.py [--check]")
    file_vectors()
    journal_vectors()
    name_vectors()
    place_vectors()
    identity_vectors()
    stale = []
    for relative, content in sorted(VECTORS.items()):
        path = os.path.join(here, relative)
        try:
            with open(path, "rb") as existing:
                same = existing.read() == content
        except FileNotFoundError:
            same = False
        if check:
            if not same:
                stale.append(relative)
            continue
        if not same:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "wb") as out:
                out.write(content)
    for folder in ("files", "journals", "names", "places", "identity"):
        directory = os.path.join(here, folder)
        for entry in os.listdir(directory) if os.path.isdir(directory) else []:
            relative = folder + "/" + entry
            if os.path.isfile(os.path.join(directory, entry)) and "." not in entry and relative not in VECTORS:
                stale.append(relative + " (not generated by this script)")
    if stale:
        sys.exit("generate_files.py: error: vectors differ from the generator:\n  " + "\n  ".join(stale))
    print("%d vectors %s" % (len(VECTORS), "match" if check else "written"))


if __name__ == "__main__":
    main()
