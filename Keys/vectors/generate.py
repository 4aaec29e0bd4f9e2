#!/usr/bin/env python3
"""Generates the known-answer vectors of Keys/key-hierarchy.md.

This is an independent implementation of the device-file formats, written
from key-hierarchy.md alone (it shares no code with the Swift sources): if
the Swift implementation opens every vector as the vector expects, the
specification is sufficient to interoperate.

libsodium (1.0.18 or later) is reached through ctypes; no package outside
the Python 3 standard library is needed. Every input, nonce and salt is
derived from a fixed name, so running the script again reproduces the
vectors byte for byte.

    python3 Keys/vectors/generate.py           # (re)writes the vectors
    python3 Keys/vectors/generate.py --check   # fails if a vector on disk differs
"""

import ctypes
import os
import struct
import sys
import unicodedata

# --- libsodium ---------------------------------------------------------------

SODIUM = ctypes.CDLL("libsodium.so.23")
if SODIUM.sodium_init() < 0:
    sys.exit("generate.py: error: sodium_init failed")

_u8p = ctypes.c_char_p
_ull = ctypes.c_ulonglong
SODIUM.crypto_generichash.argtypes = [_u8p, ctypes.c_size_t, _u8p, _ull, _u8p, ctypes.c_size_t]
SODIUM.crypto_pwhash.argtypes = [_u8p, _ull, _u8p, _ull, _u8p, _ull, ctypes.c_size_t, ctypes.c_int]
SODIUM.crypto_aead_xchacha20poly1305_ietf_encrypt.argtypes = [
    _u8p, ctypes.POINTER(_ull), _u8p, _ull, _u8p, _ull, ctypes.c_void_p, _u8p, _u8p]
SODIUM.crypto_aead_xchacha20poly1305_ietf_decrypt.argtypes = [
    _u8p, ctypes.POINTER(_ull), ctypes.c_void_p, _u8p, _ull, _u8p, _ull, _u8p, _u8p]
SODIUM.crypto_scalarmult_base.argtypes = [_u8p, _u8p]

ARGON2ID13 = 2          # crypto_pwhash_ALG_ARGON2ID13
OPS_MAX = 2**32 - 1     # crypto_pwhash_argon2id_OPSLIMIT_MAX
MEM_MIN = 8192          # crypto_pwhash_argon2id_MEMLIMIT_MIN
MEM_MAX = 4 << 30       # key-hierarchy.md: the largest memlimit a keybag may name


def blake2b(message, key=None, length=32):
    """crypto_generichash: BLAKE2b, keyed when `key` is given."""
    out = ctypes.create_string_buffer(length)
    rc = SODIUM.crypto_generichash(out, length, message, len(message), key, 0 if key is None else len(key))
    assert rc == 0
    return out.raw


def argon2id(passcode, salt, ops, mem):
    """crypto_pwhash(32 bytes, passcode, salt, ops, mem, ALG_ARGON2ID13)."""
    assert len(salt) == 16
    out = ctypes.create_string_buffer(32)
    rc = SODIUM.crypto_pwhash(out, 32, passcode, len(passcode), salt, ops, mem, ARGON2ID13)
    assert rc == 0, "crypto_pwhash failed"
    return out.raw


def aead_seal(key, nonce, plaintext, ad):
    """crypto_aead_xchacha20poly1305_ietf_encrypt: ciphertext || tag."""
    assert len(key) == 32 and len(nonce) == 24
    out = ctypes.create_string_buffer(len(plaintext) + 16)
    length = _ull(0)
    rc = SODIUM.crypto_aead_xchacha20poly1305_ietf_encrypt(
        out, ctypes.byref(length), plaintext, len(plaintext), ad, len(ad), None, nonce, key)
    assert rc == 0 and length.value == len(plaintext) + 16
    return out.raw


def aead_open(key, nonce, sealed, ad):
    """crypto_aead_xchacha20poly1305_ietf_decrypt; None if it does not authenticate."""
    if len(sealed) < 16:
        return None
    out = ctypes.create_string_buffer(max(len(sealed) - 16, 1))
    length = _ull(0)
    rc = SODIUM.crypto_aead_xchacha20poly1305_ietf_decrypt(
        out, ctypes.byref(length), None, sealed, len(sealed), ad, len(ad), nonce, key)
    return out.raw[:length.value] if rc == 0 else None


def x25519_base(secret):
    out = ctypes.create_string_buffer(32)
    assert SODIUM.crypto_scalarmult_base(out, secret) == 0
    return out.raw


# --- key-hierarchy.md, "Labels" and "Derived keys" ----------------------------

LABEL_SEAL = "DataProtection v1 keybag seal"
LABEL_DEVICE_ONLY = "DataProtection v1 device-only wrap"
LABEL_PASSCODE = "DataProtection v1 passcode wrap"
LABEL_NO_PASSCODE = "DataProtection v1 no-passcode wrap"
LABEL_COUNTER = "DataProtection v1 attempt counter"
LABEL_FINGERPRINT = "DataProtection v1 passcode fingerprint"


def derive(key, label, data=b""):
    """KDF(key, label, data) = BLAKE2b-256(key: key, message: label || 0x00 || data)."""
    return blake2b(label.encode("ascii") + b"\x00" + data, key=key)


def k_seal(uid, effaceable):
    return derive(uid, LABEL_SEAL, effaceable)


def k_device(uid):
    return derive(uid, LABEL_DEVICE_ONLY)


def k_counter(uid):
    return derive(uid, LABEL_COUNTER)


def k_passcode(uid, kdf, passcode):
    if kdf.kind == 0:
        return derive(uid, LABEL_NO_PASSCODE)
    return derive(uid, LABEL_PASSCODE, argon2id(passcode, kdf.salt, kdf.ops, kdf.mem))


def k_fingerprint(uid):
    return derive(uid, LABEL_FINGERPRINT)


def fingerprint_of_key(uid, wrapping_key):
    """FP of a failed attempt for which a passcode key was derived: MAC(K_fp, 0x01 || key)."""
    return blake2b(b"\x01" + wrapping_key, key=k_fingerprint(uid))


def fingerprint_of_passcode(uid, passcode):
    """FP of a failed attempt for which nothing was derived: MAC(K_fp, 0x02 || passcode)."""
    return blake2b(b"\x02" + passcode, key=k_fingerprint(uid))


def attempt_fingerprint(uid, kdf, passcode):
    """The fingerprint a failed attempt with `passcode` leaves in the counter."""
    if kdf.kind == 0 and passcode != b"":
        return fingerprint_of_passcode(uid, passcode)
    return fingerprint_of_key(uid, k_passcode(uid, kdf, passcode))


# --- key-hierarchy.md, "The keybag file" --------------------------------------

MAGIC = b"DPKB"
VERSION = 1
HEADER = MAGIC + bytes([VERSION])
SLOTS = [1, 2, 3, 4, 5, 6]
PASSCODE_SLOTS = [1, 2, 3, 4]
DEVICE_ONLY_SLOTS = [5, 6]
SLOT_FIELD = {
    1: "key-complete",
    2: "key-complete-unless-open-secret",
    3: "key-until-first-auth",
    4: "key-when-inactive",
    5: "key-none",
    6: "key-metadata",
}
BODY_LEN = 16 + 1 + 16 + 8 + 8 + 32 + 6 * (24 + 32 + 16)   # 513
FILE_LEN = 4 + 1 + 24 + BODY_LEN + 16                       # 558


class Kdf:
    def __init__(self, kind, salt=bytes(16), ops=0, mem=0):
        self.kind, self.salt, self.ops, self.mem = kind, salt, ops, mem


NO_PASSCODE = Kdf(0)


def slot_ad(keybag_id, slot):
    """Associated data of a slot's wrap: "DPKB" || 0x01 || keybag id || slot."""
    return HEADER + keybag_id + bytes([slot])


def encode_body(keybag_id, kdf, public, wrapped):
    """wrapped: six (nonce, ciphertext || tag) pairs, slots 1 to 6 in order."""
    body = keybag_id + bytes([kdf.kind]) + kdf.salt + struct.pack("<QQ", kdf.ops, kdf.mem) + public
    for nonce, sealed in wrapped:
        body += nonce + sealed
    return body


def seal_file(seal_key, nonce, body, header=HEADER, ad=HEADER):
    return header + nonce + aead_seal(seal_key, nonce, body, ad)


# --- deterministic inputs -------------------------------------------------------

def fixed(name, length=32):
    """Fixed pseudo-random bytes named `name` (unkeyed BLAKE2b, so reproducible)."""
    return blake2b(b"DataProtection test vector input\x00" + name.encode(), length=length)


class Device:
    """The secrets of one simulated device, all fixed by `name`."""

    def __init__(self, name):
        self.name = name
        self.uid = fixed(name + "/uid")
        self.effaceable = fixed(name + "/effaceable")
        self.keybag_id = fixed(name + "/keybag id", 16)
        self.keys = {slot: fixed("%s/slot %d key" % (name, slot)) for slot in SLOTS}
        # Slot 2 holds the class B X25519 secret; any 32 bytes are a valid secret.
        self.public = x25519_base(self.keys[2])

    def nonce(self, what):
        return fixed("%s/nonce/%s" % (self.name, what), 24)

    def wrap(self, slot, wrapping_key, ad_slot=None, ad_id=None, key=None):
        nonce = self.nonce("slot %d" % slot)
        plaintext = self.keys[slot] if key is None else key
        ad = slot_ad(self.keybag_id if ad_id is None else ad_id, slot if ad_slot is None else ad_slot)
        return nonce, aead_seal(wrapping_key, nonce, plaintext, ad)

    def wrapped_slots(self, kdf, passcode, overrides=None):
        """The six slots, wrapped as a writer MUST; `overrides` maps a slot to a replacement pair."""
        kp = k_passcode(self.uid, kdf, passcode)
        kd = k_device(self.uid)
        slots = [self.wrap(s, kp if s in PASSCODE_SLOTS else kd) for s in SLOTS]
        for slot, pair in (overrides or {}).items():
            slots[slot - 1] = pair
        return slots

    def body(self, kdf, passcode, overrides=None):
        return encode_body(self.keybag_id, kdf, self.public, self.wrapped_slots(kdf, passcode, overrides))

    def keybag(self, kdf, passcode, overrides=None, body=None, header=HEADER, ad=HEADER):
        if body is None:
            body = self.body(kdf, passcode, overrides)
        return seal_file(k_seal(self.uid, self.effaceable), self.nonce("seal"), body, header, ad)


def argon2id_kdf(name, ops=1, mem=MEM_MIN):
    return Kdf(1, fixed(name + "/salt", 16), ops, mem)


# --- vector files ---------------------------------------------------------------

VECTORS = {}


def vector(path, fields, payload):
    """`key: value` lines, an empty line, then the payload bytes (CCTV style)."""
    assert path not in VECTORS, path
    lines = []
    for key, value in fields:
        line = "%s: %s" % (key, value) if value != "" else key + ":"
        assert "\n" not in line
        lines.append(line)
    VECTORS[path] = ("\n".join(lines) + "\n\n").encode("utf-8") + payload


def passcode_fields(passcode):
    text = passcode.decode("utf-8")
    printable = text != "" and text.isascii() and text.isprintable() and text == text.strip()
    return [("passcode", text)] if printable else [("passcode-hex", passcode.hex())]


def kdf_fields(kdf):
    if kdf.kind == 0:
        return [("kdf", "none")]
    return [("kdf", "argon2id"), ("argon2id-salt", kdf.salt.hex()),
            ("argon2id-ops", str(kdf.ops)), ("argon2id-mem", str(kdf.mem))]


def keybag_vector(name, expect, description, device, passcode, payload, uid=None, effaceable=None, kdf=None):
    fields = [("expect", expect), ("description", description),
              ("uid", (uid or device.uid).hex()), ("effaceable", (effaceable or device.effaceable).hex())]
    fields += passcode_fields(passcode)
    if expect != "integrityFailure":
        fields += kdf_fields(kdf)
    if expect == "incorrectPasscode":
        fields.append(("failed-fingerprint", attempt_fingerprint(device.uid, kdf, passcode).hex()))
    if expect == "success":
        fields += [(SLOT_FIELD[s], device.keys[s].hex()) for s in SLOTS]
        fields.append(("class-b-public", device.public.hex()))
    vector(name, fields, payload)


def flip(data, offset, bit=0x01):
    data = bytearray(data)
    data[offset] ^= bit
    return bytes(data)


def keybag_vectors():
    # Positive vectors: the unwrapped keys are the expected answer.
    dev = Device("passcode")
    kdf = argon2id_kdf("passcode")
    good = dev.keybag(kdf, b"1234")
    assert len(good) == FILE_LEN
    keybag_vector("passcode", "success",
                  "passcode 1234, Argon2id 1 pass over 8 KiB: every slot unwraps",
                  dev, b"1234", good, kdf=kdf)

    nop = Device("no passcode")
    nop_bag = nop.keybag(NO_PASSCODE, b"")
    keybag_vector("no_passcode", "success",
                  "no passcode set: the empty passcode (a bare unlock) opens slots 1-4 with the no-passcode key",
                  nop, b"", nop_bag, kdf=NO_PASSCODE)

    cost = Device("stored cost")
    cost_kdf = argon2id_kdf("stored cost", ops=2, mem=64 * 1024 + 512)
    # libsodium takes memlimit in bytes and uses floor(memlimit / 1024) KiB.
    assert argon2id(b"x", cost_kdf.salt, 2, 64 * 1024 + 512) == argon2id(b"x", cost_kdf.salt, 2, 64 * 1024)
    keybag_vector("passcode_cost_from_keybag", "success",
                  "Argon2id parameters are read from the keybag (2 passes, 66048 bytes), not from local configuration",
                  cost, b"correct horse battery staple", cost.keybag(cost_kdf, b"correct horse battery staple"),
                  kdf=cost_kdf)

    uni = Device("unicode passcode")
    uni_kdf = argon2id_kdf("unicode passcode")
    uni_pass = unicodedata.normalize("NFC", "Pässwörd ✓ 合言葉").encode("utf-8")
    uni_bag = uni.keybag(uni_kdf, uni_pass)
    keybag_vector("passcode_unicode", "success",
                  "a non-ASCII passcode is its exact UTF-8 bytes (here in NFC)",
                  uni, uni_pass, uni_bag, kdf=uni_kdf)

    # incorrectPasscode: the keybag is sound, the passcode is not.
    keybag_vector("wrong_passcode", "incorrectPasscode",
                  "passcode 1235 against a keybag set up with 1234", dev, b"1235", good, kdf=kdf)
    keybag_vector("empty_passcode_on_passcode_keybag", "incorrectPasscode",
                  "a bare unlock (empty passcode) on a keybag with a passcode", dev, b"", good, kdf=kdf)
    keybag_vector("passcode_on_no_passcode_keybag", "incorrectPasscode",
                  "a non-empty passcode on a keybag without one: only the empty passcode is right",
                  nop, b"1234", nop_bag, kdf=NO_PASSCODE)
    nfd = unicodedata.normalize("NFD", uni_pass.decode("utf-8")).encode("utf-8")
    assert nfd != uni_pass
    keybag_vector("passcode_unicode_not_normalized", "incorrectPasscode",
                  "the same passcode in NFD: passcodes are not Unicode-normalized", uni, nfd, uni_bag,
                  kdf=uni_kdf)

    # integrityFailure, outer seal: the file does not authenticate or has the wrong shape.
    other = Device("another device")
    keybag_vector("wrong_device_key", "integrityFailure",
                  "the uid of another device: the seal key differs, the keybag does not open",
                  dev, b"1234", good, uid=other.uid)
    keybag_vector("wrong_effaceable_key", "integrityFailure",
                  "another effaceable key (as after an erase): the keybag does not open",
                  dev, b"1234", good, effaceable=other.effaceable)
    tampered = [
        ("tampered_magic", flip(good, 0), "bit 0 of the magic flipped (\"EPKB\")"),
        ("tampered_version", flip(good, 4, 0x02), "version 3 instead of 1"),
        ("tampered_outer_nonce", flip(good, 5 + 11), "one bit of the outer nonce flipped"),
        ("tampered_ciphertext", flip(good, 29 + 200), "one bit of the sealed body flipped"),
        ("tampered_tag", flip(good, FILE_LEN - 1, 0x80), "one bit of the outer tag flipped"),
        ("truncated", good[:-1], "the file without its last byte"),
        ("extended", good + b"\x00", "the file with a zero byte appended"),
        ("empty_file", b"", "an empty keybag file"),
    ]
    for name, payload, description in tampered:
        keybag_vector(name, "integrityFailure", description, dev, b"1234", payload)

    # integrityFailure, the seal opens: authenticated but malformed or mismatched content.
    seal = dev.keybag  # shorthand
    kp = k_passcode(dev.uid, kdf, b"1234")
    kd = k_device(dev.uid)
    sealed_cases = [
        ("outer_ad_version_2", seal(kdf, b"1234", header=HEADER, ad=MAGIC + b"\x02"),
         "sealed with associated data \"DPKB\" || 0x02 under a version 1 header"),
        ("outer_ad_empty", seal(kdf, b"1234", ad=b""),
         "sealed with empty associated data instead of \"DPKB\" || 0x01"),
        ("version_2_sealed", seal(kdf, b"1234", header=MAGIC + b"\x02", ad=MAGIC + b"\x02"),
         "a consistently sealed version 2 file: unknown versions are refused"),
        ("body_one_byte_long", seal(kdf, b"1234", body=dev.body(kdf, b"1234") + b"\x00"),
         "a sealed 514-byte body: trailing bytes are refused"),
        ("body_one_byte_short", seal(kdf, b"1234", body=dev.body(kdf, b"1234")[:-1]),
         "a sealed 512-byte body: the last slot is short"),
        ("kdf_unknown_kind", seal(kdf, b"1234", body=encode_body(
            dev.keybag_id, Kdf(2, kdf.salt, kdf.ops, kdf.mem), dev.public, dev.wrapped_slots(kdf, b"1234"))),
         "passcode algorithm 2 (unknown)"),
        ("kdf_none_with_salt", seal(NO_PASSCODE, b"", body=encode_body(
            dev.keybag_id, Kdf(0, b"\x00" * 15 + b"\x01"), dev.public, dev.wrapped_slots(NO_PASSCODE, b""))),
         "no passcode, but a non-zero salt"),
        ("kdf_none_with_cost", seal(NO_PASSCODE, b"", body=encode_body(
            dev.keybag_id, Kdf(0, bytes(16), 1, MEM_MIN), dev.public, dev.wrapped_slots(NO_PASSCODE, b""))),
         "no passcode, but non-zero operations and memory"),
        ("kdf_ops_zero", seal(kdf, b"1234", body=encode_body(
            dev.keybag_id, Kdf(1, kdf.salt, 0, MEM_MIN), dev.public, dev.wrapped_slots(kdf, b"1234"))),
         "Argon2id with 0 passes (minimum 1)"),
        ("kdf_ops_too_large", seal(kdf, b"1234", body=encode_body(
            dev.keybag_id, Kdf(1, kdf.salt, OPS_MAX + 1, MEM_MIN), dev.public, dev.wrapped_slots(kdf, b"1234"))),
         "Argon2id with 2^32 passes (maximum 2^32 - 1)"),
        ("kdf_memory_too_small", seal(kdf, b"1234", body=encode_body(
            dev.keybag_id, Kdf(1, kdf.salt, 1, MEM_MIN - 1), dev.public, dev.wrapped_slots(kdf, b"1234"))),
         "Argon2id with 8191 bytes of memory (minimum 8192)"),
        ("kdf_memory_too_large", seal(kdf, b"1234", body=encode_body(
            dev.keybag_id, Kdf(1, kdf.salt, 1, MEM_MAX + 1), dev.public, dev.wrapped_slots(kdf, b"1234"))),
         "Argon2id with 4 GiB + 1 byte of memory (maximum 4 GiB)"),
        ("device_only_slots_foreign", seal(kdf, b"1234", overrides={
            5: dev.wrap(5, k_device(other.uid)), 6: dev.wrap(6, k_device(other.uid))}),
         "the seal opens, but slots 5 and 6 are wrapped with another device's device-only key"),
        ("device_only_slots_swapped", seal(kdf, b"1234", overrides={
            5: dev.wrap(6, kd), 6: dev.wrap(5, kd)}),
         "slots 5 and 6 exchanged: each wrap's associated data names its own slot"),
        ("slot_ad_wrong_keybag_id", seal(kdf, b"1234", overrides={
            s: dev.wrap(s, kp if s in PASSCODE_SLOTS else kd, ad_id=other.keybag_id) for s in SLOTS}),
         "every slot wrapped with another keybag id in its associated data"),
        ("passcode_slots_swapped", seal(kdf, b"1234", overrides={
            2: dev.wrap(3, kp), 3: dev.wrap(2, kp)}),
         "slots 2 and 3 exchanged: slot 1 opens with the right passcode, slot 2 does not"),
        ("passcode_slot_foreign_key", seal(kdf, b"1234", overrides={
            4: dev.wrap(4, k_passcode(dev.uid, kdf, b"4321"))}),
         "slot 4 wrapped under the key of another passcode: slot 1 opens, slot 4 does not"),
    ]
    for name, payload, description in sealed_cases:
        keybag_vector(name, "integrityFailure", description, dev, b"1234", payload)


# --- key-hierarchy.md, "The attempt counter" -----------------------------------

ATTEMPTS_LEN = 82


def attempts_body(failures, last, fp, flags=None, magic=b"DPAC", version=1):
    if flags is None:
        flags = (1 if last is not None else 0) | (2 if fp is not None else 0)
    return (magic + bytes([version]) + struct.pack("<IBq", failures, flags, last or 0) + (fp or bytes(32)))


def attempts_file(uid, body):
    return body + blake2b(body, key=k_counter(uid))


def attempts_vector(name, expect, description, uid, payload, failures=None, last=None, fp=None, of=None):
    fields = [("expect", expect), ("description", description), ("uid", uid.hex())]
    if expect == "success":
        fields += [("failures", str(failures)),
                   ("last-failure-ns", "none" if last is None else str(last)),
                   ("fingerprint", "none" if fp is None else fp.hex())]
        if of is not None:
            fields.append(of)
    vector("attempts/" + name, fields, payload)


def attempts_vectors():
    uid = Device("attempts").uid
    other = Device("another device").uid
    # A wrong passcode 0000 against an Argon2id keybag: the fingerprint is of the derived key.
    key_0000 = k_passcode(uid, argon2id_kdf("attempts"), b"0000")
    fp = fingerprint_of_key(uid, key_0000)
    of_0000 = ("fingerprint-of-key", key_0000.hex())

    def ok(name, description, failures, last, fpr, of=None):
        payload = attempts_file(uid, attempts_body(failures, last, fpr))
        assert len(payload) == ATTEMPTS_LEN
        attempts_vector(name, "success", description, uid, payload, failures, last, fpr, of)
        return payload

    zero = ok("zero", "the record after set-up or a successful unlock: no failures", 0, None, None)
    three = ok("three_failures", "3 failures, the last with passcode 0000 (fingerprint of its derived key) at 1.7e18 ns",
               3, 1_700_000_000_123_456_789, fp, of_0000)
    ok("punitive", "the record assumed for a missing counter: 9 failures from now, no fingerprint",
       9, 3_600_000_000_000, None)
    ok("negative_instant", "the last failure before the clock's origin (signed nanoseconds)",
       5, -1_000_000_001, fp, of_0000)
    ok("fingerprint_of_passcode", "a passcode given to a device without one: the fingerprint is of the raw passcode",
       1, 42, fingerprint_of_passcode(uid, "Pässwörd".encode()), ("fingerprint-of-passcode-hex", "Pässwörd".encode().hex()))
    ok("fingerprint_only", "flags = 2: a fingerprint without an instant",
       1, None, fp, of_0000)
    ok("max_failures", "the largest count the field holds",
       2**32 - 1, 2**63 - 1, fp, of_0000)

    def bad(name, description, payload):
        attempts_vector(name, "integrityFailure", description, uid, payload)

    bad("flipped_mac", "one bit of the MAC flipped", flip(three, ATTEMPTS_LEN - 1))
    bad("flipped_failures", "one bit of the failure count flipped (3 -> 2), MAC unchanged", flip(three, 5))
    bad("flipped_fingerprint", "one bit of the fingerprint flipped, MAC unchanged", flip(three, 18 + 7))
    bad("wrong_device_key", "a valid record of another device", attempts_file(other, attempts_body(3, 1, fp)))
    bad("truncated", "81 bytes", three[:-1])
    bad("extended", "83 bytes", three + b"\x00")
    bad("empty", "an empty file", b"")
    bad("mac_ok_wrong_magic", "authentic MAC over the magic \"DPAX\"",
        attempts_file(uid, attempts_body(3, 1, fp, magic=b"DPAX")))
    bad("mac_ok_wrong_version", "authentic MAC over version 2",
        attempts_file(uid, attempts_body(3, 1, fp, version=2)))
    bad("mac_ok_unknown_flag", "authentic MAC over flags = 7 (bit 2 is not defined)",
        attempts_file(uid, attempts_body(3, 1, fp, flags=7)))
    bad("mac_not_keyed_label", "MAC computed as KDF(K_counter, label, body) instead of BLAKE2b(K_counter, body)",
        zero[:50] + derive(k_counter(uid), LABEL_COUNTER, zero[:50]))


# --- key-hierarchy.md, "uid and effaceable" (§5.3) ----------------------------------

UID_LEN = 37
EFFACEABLE_V1_LEN = 37
EFFACEABLE_V2_LEN = 69
EMPTY = bytes(32)


def uid_file(uid, magic=b"DPUK", version=1):
    return magic + bytes([version]) + uid


def effaceable_file(slots, magic=b"DPEF", version=2):
    return magic + bytes([version]) + b"".join(slots)


def slot_field(key):
    return "empty" if key is None or key == EMPTY else key.hex()


def device_vector(name, expect, description, payload, fields):
    vector("device/" + name, [("expect", expect), ("description", description)] + fields, payload)


def device_vectors():
    """The device files with a byte layout besides the keybag and the counter: `uid`, and
    `effaceable` in both versions, each beside a keybag that opens (or not) under its slots."""
    dev = Device("device files")
    uid, e0, e1 = dev.uid, dev.effaceable, fixed("device files/effaceable 2")
    body = dev.body(NO_PASSCODE, b"")
    keybag_under = {key: seal_file(k_seal(uid, key), dev.nonce("seal under " + key.hex()[:8]), body) for key in (e0, e1)}
    metadata = ("key-metadata", dev.keys[6].hex())

    def effaceable_ok(name, description, payload, slots, sealed_under, after_boot):
        """Boot opens the keybag under a slot (§8.3 step 5) and empties the other: `after-boot`."""
        device_vector(name, "success", description, payload, [
            ("file", "effaceable"), ("uid", uid.hex()), ("keybag", keybag_under[sealed_under].hex()),
            ("slot-0", slot_field(slots[0])), ("slot-1", slot_field(slots[1])),
            ("after-boot", after_boot.hex()), metadata])

    v2 = effaceable_file([e0, EMPTY])
    effaceable_ok("effaceable_v2", "version 2, the key in slot 0, slot 1 empty: as a device is created",
                  v2, [e0, None], e0, v2)
    rotated = effaceable_file([EMPTY, e1])
    effaceable_ok("effaceable_v2_slot_1", "version 2 after one rotation: the key in slot 1, slot 0 empty",
                  rotated, [None, e1], e1, rotated)
    both = effaceable_file([e0, e1])
    effaceable_ok("effaceable_v2_rotation_old_keybag", "both slots full, the keybag sealed under slot 0: a rotation "
                  "cut before its new keybag (§8.6 step 4); boot empties slot 1", both, [e0, e1], e0, v2)
    effaceable_ok("effaceable_v2_rotation_new_keybag", "both slots full, the keybag sealed under slot 1: a rotation "
                  "cut after its new keybag (§8.6 step 5); boot empties slot 0", both, [e0, e1], e1, rotated)
    v1 = effaceable_file([e0], version=1)
    effaceable_ok("effaceable_v1", "version 1 (37 bytes, one slot): read as slot 0, slot 1 empty; boot leaves it as "
                  "it is", v1, [e0, None], e0, v1)
    effaceable_ok("effaceable_v1_69_bytes", "69 bytes with version 1: a first rotation whose header rewrite a power "
                  "cut lost while its slot 1 reached the disk; read as version 2 (the keybag sealed under slot 1, "
                  "so boot empties slot 0)", effaceable_file([e0, e1], version=1), [e0, e1], e1,
                  effaceable_file([EMPTY, e1]))
    short_v2 = effaceable_file([e0], version=2)
    effaceable_ok("effaceable_v2_37_bytes", "37 bytes with version 2: the extension of a version-1 file that a power "
                  "cut lost; slot 0 alone", short_v2, [e0, None], e0, short_v2)
    device_vector("effaceable_v2_erased", "success", "version 2, both slots empty: an erased device, which boot "
                  "creates afresh (a new key, keybag and counter; the UID kept)", effaceable_file([EMPTY, EMPTY]),
                  [("file", "effaceable"), ("uid", uid.hex()), ("keybag", keybag_under[e0].hex()),
                   ("slot-0", "empty"), ("slot-1", "empty")])

    def effaceable_bad(name, description, payload, fails_at, sealed_under=e0):
        device_vector(name, "integrityFailure", description, payload, [
            ("file", "effaceable"), ("uid", uid.hex()), ("keybag", keybag_under[sealed_under].hex()),
            ("fails-at", fails_at)])

    effaceable_bad("effaceable_wrong_magic", "version 2 with the magic \"DPEX\"",
                   effaceable_file([e0, EMPTY], magic=b"DPEX"), "parse")
    effaceable_bad("effaceable_version_0", "69 bytes with version 0", effaceable_file([e0, EMPTY], version=0), "parse")
    effaceable_bad("effaceable_version_3", "69 bytes with version 3 (a later version is refused, not guessed)",
                   effaceable_file([e0, EMPTY], version=3), "parse")
    effaceable_bad("effaceable_v1_version_3", "37 bytes with version 3", effaceable_file([e0], version=3), "parse")
    effaceable_bad("effaceable_36_bytes", "version 1 cut to 36 bytes", v1[:-1], "parse")
    effaceable_bad("effaceable_38_bytes", "version 1 with a byte more", v1 + b"\x00", "parse")
    effaceable_bad("effaceable_68_bytes", "version 2 cut to 68 bytes", v2[:-1], "parse")
    effaceable_bad("effaceable_70_bytes", "version 2 with a byte more", v2 + b"\x00", "parse")
    effaceable_bad("effaceable_empty_file", "an empty file", b"", "parse")
    effaceable_bad("effaceable_v1_empty_slot", "37 bytes (version 1) whose only slot is empty: damage, never an "
                   "erased device", effaceable_file([EMPTY], version=1), "parse")
    effaceable_bad("effaceable_v2_37_bytes_empty_slot", "37 bytes with version 2 and an empty slot 0",
                   effaceable_file([EMPTY], version=2), "parse")
    effaceable_bad("effaceable_v2_foreign_keys", "version 2, both slots full, the keybag sealed under neither: "
                   "it does not open (§8.3 step 5)", effaceable_file([fixed("device files/foreign 0"),
                                                                     fixed("device files/foreign 1")]), "boot")
    effaceable_bad("effaceable_v2_slot_0_of_other_keybag", "version 2, slot 1 empty, slot 0 the key of another "
                   "keybag: the keybag sealed under a key the file does not hold", rotated[:5] + e1 + EMPTY, "boot")

    good_effaceable = ("effaceable-file", v2.hex())

    def uid_vector(name, expect, description, payload, fails_at=None):
        fields = [("file", "uid"), good_effaceable, ("keybag", keybag_under[e0].hex())]
        fields += [("key", uid.hex()), metadata, ("after-boot", v2.hex())] if expect == "success" else [("fails-at", fails_at)]
        device_vector(name, expect, description, payload, fields)

    good_uid = uid_file(uid)
    assert len(good_uid) == UID_LEN
    uid_vector("uid", "success", "the device key file: \"DPUK\" || 0x01 || UID", good_uid)
    uid_vector("uid_36_bytes", "integrityFailure", "cut to 36 bytes", good_uid[:-1], "parse")
    uid_vector("uid_38_bytes", "integrityFailure", "a byte more", good_uid + b"\x00", "parse")
    uid_vector("uid_empty_file", "integrityFailure", "an empty file", b"", "parse")
    uid_vector("uid_wrong_magic", "integrityFailure", "the magic \"DPUX\"", uid_file(uid, magic=b"DPUX"), "parse")
    uid_vector("uid_version_0", "integrityFailure", "version 0", uid_file(uid, version=0), "parse")
    uid_vector("uid_version_2", "integrityFailure", "version 2 (only version 1 exists)", uid_file(uid, version=2), "parse")
    uid_vector("uid_of_another_device", "integrityFailure", "a sound uid file of another device: the keybag does not "
               "open under it", uid_file(Device("another device").uid), "boot")


# --- main --------------------------------------------------------------------------

def main():
    here = os.path.dirname(os.path.abspath(__file__))
    check = sys.argv[1:] == ["--check"]
    if sys.argv[1:] not in ([], ["--check"]):
        sys.exit("usage: generate.py [--check]")
    keybag_vectors()
    attempts_vectors()
    device_vectors()
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
    expected = set(VECTORS)
    for folder in (here, os.path.join(here, "attempts"), os.path.join(here, "device")):
        for entry in os.listdir(folder) if os.path.isdir(folder) else []:
            relative = os.path.relpath(os.path.join(folder, entry), here)
            if os.path.isfile(os.path.join(folder, entry)) and "." not in entry and relative not in expected:
                stale.append(relative + " (not generated by this script)")
    if stale:
        sys.exit("generate.py: error: vectors differ from the generator:\n  " + "\n  ".join(stale))
    print("%d vectors %s" % (len(VECTORS), "match" if check else "written"))


if __name__ == "__main__":
    main()
