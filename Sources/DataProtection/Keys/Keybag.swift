import Foundation
import SodiumBridge

/// A key wrapped with XChaCha20-Poly1305: a random nonce and `ciphertext || tag`.
package struct WrappedKey: Sendable, Hashable {
    package static let byteCount = 24 + 32 + 16
    package var nonce: Data
    package var sealed: Data
}

/// The keybag: the wrapped class keys and the passcode parameters.
///
/// Every field is public data (keys appear only wrapped), so the model is a
/// plain value. On disk it is sealed as a whole under `K_seal`, which depends on
/// the effaceable key: destroying that key destroys the keybag.
/// Byte layout: `Keys/key-hierarchy.md`, "The keybag file".
package struct Keybag: Sendable, Hashable {
    static let magic = Data("DPKB".utf8)
    static let version: UInt8 = 1
    static let idByteCount = 16
    /// Byte count of the body (before sealing).
    static let bodyByteCount = 16 + 1 + 16 + 8 + 8 + 32 + KeybagSlot.allCases.count * WrappedKey.byteCount
    /// Byte count of the whole file.
    static let fileByteCount = 4 + 1 + 24 + bodyByteCount + 16

    /// Random identifier, bound into every wrap's associated data.
    package var id: Data
    /// How the passcode is stretched; `.none` when no passcode is set.
    package var passcode: PasscodeParameters
    /// The class B public key (always readable, so class B files can be created while locked).
    package var classBPublicKey: Data
    /// The wrapped keys.
    package var slots: [KeybagSlot: WrappedKey]

    /// The associated data of a slot's wrap: `"DPKB" || version || keybag id || slot`.
    package static func associatedData(id: Data, slot: KeybagSlot) -> Data {
        magic + Data([version]) + id + Data([slot.rawValue])
    }

    /// Wraps `key` into `slot` with `wrappingKey` (a fresh random nonce).
    package mutating func wrap(_ key: SecureBytes, into slot: KeybagSlot, with wrappingKey: SecureBytes) {
        let nonce = XChaCha20Poly1305.randomNonce()
        do {
            let sealed = try XChaCha20Poly1305.seal(
                key, using: wrappingKey, nonce: nonce, authenticating: Self.associatedData(id: id, slot: slot))
            slots[slot] = WrappedKey(nonce: nonce, sealed: sealed)
        } catch {
            preconditionFailure("wrapping a 32-byte key cannot fail: \(error)")
        }
    }

    /// Unwraps the key in `slot`; `nil` when the wrapping key is wrong or the slot was tampered with.
    package func unwrap(_ slot: KeybagSlot, with wrappingKey: SecureBytes) -> SecureBytes? {
        guard let wrapped = slots[slot] else { return nil }
        return try? XChaCha20Poly1305.openSecret(
            wrapped.sealed, using: wrappingKey, nonce: wrapped.nonce, authenticating: Self.associatedData(id: id, slot: slot))
    }

    // MARK: - Encoding

    /// The body: id, passcode parameters, class B public key, slots 1...6.
    package func encodedBody() -> Data {
        ByteWriter.data(byteCount: Self.bodyByteCount) { writer in
            writer.append(id)
            switch passcode {
            case .none:
                writer.append(UInt8(0))
                writer.append(Data(count: 16))
                writer.append(UInt64(0))
                writer.append(UInt64(0))
            case .argon2id(let salt, let operations, let memory):
                writer.append(UInt8(1))
                writer.append(salt)
                writer.append(operations)
                writer.append(memory)
            }
            writer.append(classBPublicKey)
            for slot in KeybagSlot.allCases {
                let wrapped = slots[slot]!
                writer.append(wrapped.nonce)
                writer.append(wrapped.sealed)
            }
        }
    }

    /// Parses a body; checks every field's range.
    package static func decodeBody(_ body: Data) throws(DataProtectionError) -> Keybag {
        var reader = ByteReader(body, what: "keybag")
        let id = try reader.bytes(idByteCount)
        let kind = try reader.uint8()
        let salt = try reader.bytes(16)
        let operations = try reader.uint64()
        let memory = try reader.uint64()
        let passcode: PasscodeParameters
        switch kind {
        case 0:
            guard salt == Data(count: 16), operations == 0, memory == 0 else {
                throw .integrity("The keybag names no passcode but carries passcode parameters.")
            }
            passcode = .none
        case 1:
            guard operations >= Argon2id.minimumOperations, operations <= Argon2id.maximumOperations,
                  memory >= Argon2id.minimumMemory, memory <= PasscodeParameters.maximumMemory else {
                throw .integrity("The keybag's Argon2id parameters (\(operations) passes, \(memory) bytes) are out of range.")
            }
            passcode = .argon2id(salt: salt, operations: operations, memory: memory)
        default:
            throw .integrity("The keybag names an unknown passcode algorithm (\(kind)).")
        }
        let publicKey = try reader.bytes(X25519.keyByteCount)
        var slots: [KeybagSlot: WrappedKey] = [:]
        for slot in KeybagSlot.allCases {
            slots[slot] = WrappedKey(nonce: try reader.bytes(24), sealed: try reader.bytes(48))
        }
        try reader.expectEnd()
        return Keybag(id: id, passcode: passcode, classBPublicKey: publicKey, slots: slots)
    }

    /// The file: `"DPKB" || 0x01 || nonce(24) || XChaCha20-Poly1305(K_seal, nonce, body, ad: "DPKB" || 0x01)`.
    package func sealedFile(with sealKey: SecureBytes) -> Data {
        let header = Self.magic + Data([Self.version])
        let nonce = XChaCha20Poly1305.randomNonce()
        do {
            return header + nonce + (try XChaCha20Poly1305.seal(encodedBody(), using: sealKey, nonce: nonce, authenticating: header))
        } catch {
            preconditionFailure("sealing the keybag cannot fail: \(error)")
        }
    }

    /// Opens a keybag file.
    package static func open(file: Data, sealKey: SecureBytes) throws(DataProtectionError) -> Keybag {
        var reader = ByteReader(file, what: "keybag")
        try reader.expect(ascii: "DPKB")
        let version = try reader.uint8()
        guard version == Self.version else {
            throw .integrity("The keybag has format version \(version); this build reads version \(Self.version).")
        }
        let nonce = try reader.bytes(24)
        let sealed = try reader.bytes(reader.remaining)
        guard sealed.count == bodyByteCount + 16 else {
            throw .integrity("The keybag is \(file.count) bytes long; it must be \(fileByteCount).")
        }
        let body: Data
        do {
            body = try XChaCha20Poly1305.open(sealed, using: sealKey, nonce: nonce, authenticating: magic + Data([version]))
        } catch {
            throw .integrity(
                "The keybag does not authenticate: it was tampered with, or belongs to another device or effaceable key.",
                hint: "Restore the device directory from a backup, or erase the device (all data is lost).")
        }
        return try decodeBody(body)
    }
}
