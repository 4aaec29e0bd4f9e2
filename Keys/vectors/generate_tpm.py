#!/usr/bin/env python3
"""The TPM derivations that need no TPM (key-hierarchy.md §4.4.2, §4.4.4):
writes tpm-derivations.json. Python's hashlib BLAKE2b only."""
import hashlib, json, os

def blake2b(key, data):
    return hashlib.blake2b(data, key=key, digest_size=32).digest()

vectors = []
for name, stretched, factor, counter_key, epoch in [
    ("S = 32 × 0x11, F = 32 × 0x22, K_counter = 32 × 0x33, epoch 1", bytes([0x11]) * 32, bytes([0x22]) * 32, bytes([0x33]) * 32, 1),
    ("S = 0x00…0x1f, F = 0x20…0x3f, K_counter = 0x40…0x5f, epoch 2^40 + 7", bytes(range(32)), bytes(range(32, 64)), bytes(range(64, 96)), (1 << 40) + 7),
]:
    vectors.append({
        "name": name,
        "stretched": stretched.hex(),
        "factor": factor.hex(),
        "counterKey": counter_key.hex(),
        "epoch": epoch,
        "authValue": blake2b(stretched, b"DataProtection v1 TPM passcode auth").hex(),
        "passcodeKey": blake2b(factor, b"DataProtection v1 passcode wrap" + b"\x00" + stretched).hex(),
        "epochKey": blake2b(counter_key, b"DataProtection v1 attempt counter epoch" + b"\x00" + epoch.to_bytes(8, "big")).hex(),
    })

with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "tpm-derivations.json"), "w") as out:
    json.dump({"description": "key-hierarchy.md §4.4.2 and §4.4.4: authValue = BLAKE2b-256(key: S, label_auth); "
               "K_passcode = BLAKE2b-256(key: F, label_passcode || 0x00 || S); "
               "K_epoch = BLAKE2b-256(key: K_counter, label_epoch || 0x00 || u64 epoch)", "vectors": vectors}, out, indent=2)
    out.write("\n")
