import Foundation
import SodiumBridge
import SystemPackage

/// The device key ("UID"): the root every class key depends on.
///
/// The key never leaves its provider: callers ask for keys *derived* from it,
/// as software asks Apple's AES engine to use the UID. A file-backed provider
/// stands in for the hardware today; a kernel-keyring or TPM provider can
/// replace it by conforming to this protocol.
package protocol DeviceKeyProvider: Sendable {
    /// `BLAKE2b-256(key: UID, message: label || 0x00 || input...)` (see `Keys/key-hierarchy.md`).
    func deriveKey(label: String, input: [BLAKE2b.Part]) -> SecureBytes
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
                hint: "Restore the device key file, or erase the device to start afresh (all data is lost).")
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

    package func deriveKey(label: String, input: [BLAKE2b.Part]) -> SecureBytes {
        BLAKE2b.deriveKey(key: key, [.label(label), .data(Data([0]))] + input)
    }
}
