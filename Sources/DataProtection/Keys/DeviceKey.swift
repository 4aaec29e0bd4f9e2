import Foundation
import SodiumBridge
import SystemPackage

/// The device key ("UID"): the root every class key depends on, behind whatever holds it.
///
/// The key never leaves its provider: the device asks it for keys *derived* from it, as
/// software asks Apple's AES engine to use the UID. By default the key is a random 32-byte
/// file, `uid`, in the device directory; a provider backed by a TPM, an HSM or the kernel
/// keyring takes its place through ``DeviceConfiguration/deviceKeyProvider``, and then
/// no key file is written at all. What each choice protects against is in
/// `Keys/key-hierarchy.md` §4.1 and §10.
///
/// The contract: ``deriveKey(from:)`` is a pseudorandom function of the message under a
/// key only the provider holds, returning 32 bytes, always the same for the same message
/// (the built-in provider computes keyed BLAKE2b-256; HMAC-SHA-256 in a TPM or HSM serves
/// as well). A device created with one provider opens only with the same key again:
/// another provider, or another key, is `integrityFailure`, as a data directory moved to
/// another device is.
public protocol DeviceKeyProvider: Sendable {
    /// Derives a 32-byte key from `message`: `label || 0x00 || inputs`, where the label names
    /// the key's purpose (`Keys/key-hierarchy.md` §4) and the inputs may be secret (the
    /// stretched passcode). The message and the result are in secure memory: do not copy
    /// either out of it, log it or keep it.
    ///
    /// - Throws: a ``DataProtectionError`` (`ioFailure` when the hardware cannot be reached,
    ///   say); the operation that needed the key fails with it and changes nothing.
    func deriveKey(from message: KeyMaterial) throws(DataProtectionError) -> KeyMaterial
}

extension DeviceKeyProvider {
    /// The key for `label` and `input`: the message built in secure memory, the provider
    /// asked, and its answer checked.
    func deriveKey(label: String, input: [BLAKE2b.Part]) throws(DataProtectionError) -> SecureBytes {
        let message = KeyMaterial(secure: BLAKE2b.gathered([.label(label), .data(Data([0]))] + input))
        let key = try deriveKey(from: message)
        guard key.count == 32 else {
            throw DataProtectionError(.ioFailure, "The device key provider returned a \(key.count)-byte key; 32 bytes are needed.")
        }
        return key.bytes
    }
}

/// The device key kept in the device directory's `uid` file (mode 0600):
/// `"DPUK" || 0x01 || 32 key bytes`.
package final class FileDeviceKey: DeviceKeyProvider {
    static let magic = Data("DPUK".utf8)
    static let version: UInt8 = 1
    static let fileByteCount = 4 + 1 + 32

    private let key: SecureBytes

    /// Wraps an existing key (known-answer tests).
    package init(key: SecureBytes) {
        precondition(key.count == 32, "the device key is 32 bytes")
        self.key = key
    }

    /// Loads the key at `path`; creates a fresh random one if `create` and the file is missing.
    package static func load(at path: FilePath, fileSystem: any FileSystem, create: Bool) throws(DataProtectionError) -> FileDeviceKey {
        if let contents = try fileSystem.readSecretFile(at: path) {
            return try FileDeviceKey(key: decode(contents))
        }
        guard create else {
            throw .integrity(
                "The device key file \(path.lastComponent?.string ?? "uid") is missing, so the keybag cannot be opened.",
                hint: "Restore the device key file, or open the device with the device key provider it was created with; else erase the device to start afresh (all data is lost).")
        }
        let key = SecureBytes.random(count: 32)
        try AtomicFileWriter(fileSystem: fileSystem).write(encode(key), to: path)
        return FileDeviceKey(key: key)
    }

    /// The bytes of a `uid` file.
    static func encode(_ key: SecureBytes) -> [FileBytes] {
        [.data(magic + Data([version])), .secret(key)]
    }

    /// The key of a `uid` file.
    static func decode(_ contents: SecureBytes) throws(DataProtectionError) -> SecureBytes {
        guard contents.count == fileByteCount else {
            throw .integrity("The device key file is \(contents.count) bytes long; it must be \(fileByteCount).")
        }
        guard contents.hasPrefix(magic + Data([version])) else {
            throw .integrity("The device key file has a wrong magic or an unknown version.")
        }
        return SecureBytes(copying: contents, offset: 5, count: 32)
    }

    /// Keyed BLAKE2b-256 of `message` under the device key.
    package func deriveKey(from message: KeyMaterial) -> KeyMaterial {
        KeyMaterial(secure: BLAKE2b.deriveKey(key: key, [.secret(message.bytes)]))
    }
}
