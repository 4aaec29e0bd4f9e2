import Foundation
import SodiumBridge

/// The keys of one open protected file, derived from its random per-file key.
///
/// Wiped as a whole when the class key is discarded (or the file is closed).
package final class FileKeys: Sendable {
    enum Label {
        static let chunks = "DataProtection v1 file chunks"
        static let header = "DataProtection v1 file header"
        static let classBWrap = "DataProtection v1 class B file wrap"
    }

    /// Seals chunk records.
    package let chunkKey: SecureBytes
    /// Authenticates header slots and journals.
    package let macKey: SecureBytes
    /// The per-file key itself (kept to rewrap it on a class change).
    let fileKey: SecureBytes

    /// The keys of `fileKey`, which is copied: the three keys share one secure allocation
    /// (a small file's put used to spend a fifth of its CPU time allocating them apart).
    package convenience init(fileKey: SecureBytes) {
        let keys = SecureBytes.allocatingTogether([32, 32, 32])
        keys[0].withUnsafeMutableBytes { out in fileKey.withUnsafeBytes { out.copyMemory(from: $0) } }
        self.init(keys)
    }

    /// Derives the chunk and header keys from `keys[0]` into `keys[1]` and `keys[2]`.
    private init(_ keys: [SecureBytes]) {
        fileKey = keys[0]
        chunkKey = keys[1]
        macKey = keys[2]
        BLAKE2b.deriveKey(into: chunkKey, key: fileKey, [.label(Label.chunks)])
        BLAKE2b.deriveKey(into: macKey, key: fileKey, [.label(Label.header)])
        // Inert unless a key-hygiene test records.
        SecretRecorder.record(fileKey, "file key")
        SecretRecorder.record(chunkKey, "file chunk key")
        SecretRecorder.record(macKey, "file header key")
    }

    /// A fresh random per-file key.
    static func generate() -> FileKeys {
        let keys = SecureBytes.allocatingTogether([32, 32, 32])
        keys[0].randomize()
        return FileKeys(keys)
    }

    package func wipe() {
        fileKey.wipe()
        chunkKey.wipe()
        macKey.wipe()
    }

    // MARK: - Wrapping with the class key

    /// Wraps the file key into `header` for its class: with the class key, or for
    /// class B with a key agreed between a fresh ephemeral key pair and the class B
    /// public key (the ephemeral secret is wiped at once).
    ///
    /// - Throws: `protectedDataUnavailable` when the class key is not in memory.
    package func wrap(into header: inout FileHeader, device: Device) throws(DataProtectionError) {
        header.wrapNonce = XChaCha20Poly1305.randomNonce()
        if header.protectionClass == .completeUnlessOpen {
            let (ephemeralPublic, ephemeralSecret) = X25519.generateKeyPair()
            defer { ephemeralSecret.wipe() }
            header.ephemeralPublicKey = ephemeralPublic
            let classPublic = device.classBPublicKey
            let wrappingKey = try Self.classBWrappingKey(secret: ephemeralSecret, peer: classPublic,
                                                         ephemeralPublic: ephemeralPublic, classPublic: classPublic)
            defer { wrappingKey.wipe() }
            header.wrappedKey = try Self.seal(fileKey, with: wrappingKey, header: header)
            return
        }
        header.ephemeralPublicKey = Data(count: 32)
        let snapshot = header
        guard let wrapped = try device.withClassKey(for: header.protectionClass, { classKey throws(DataProtectionError) in
            try Self.seal(fileKey, with: classKey, header: snapshot)
        }) else {
            throw device.classUnavailable(header.protectionClass)
        }
        header.wrappedKey = wrapped
    }

    /// Unwraps the file key of `header` and checks the header's MAC with it.
    ///
    /// - Throws: `protectedDataUnavailable` without the class key; `integrityFailure`
    ///   when the wrap or the MAC does not authenticate.
    static func unwrap(_ slot: FileHeader.UnverifiedSlot, device: Device) throws(DataProtectionError) -> FileKeys {
        let header = slot.header
        let fileKey: SecureBytes?
        if header.protectionClass == .completeUnlessOpen {
            let classPublic = device.classBPublicKey
            fileKey = try device.withClassKey(for: .completeUnlessOpen) { secret throws(DataProtectionError) in
                let wrappingKey = try classBWrappingKey(secret: secret, peer: header.ephemeralPublicKey,
                                                        ephemeralPublic: header.ephemeralPublicKey, classPublic: classPublic)
                defer { wrappingKey.wipe() }
                return try open(header, with: wrappingKey)
            } ?? nil
            if fileKey == nil, !device.hasClassKey(for: .completeUnlessOpen) {
                throw device.classUnavailable(.completeUnlessOpen)
            }
        } else {
            guard let unwrapped = try device.withClassKey(for: header.protectionClass, { classKey throws(DataProtectionError) in
                try open(header, with: classKey)
            }) else {
                throw device.classUnavailable(header.protectionClass)
            }
            fileKey = unwrapped
        }
        guard let fileKey else {
            throw .integrity("The file's key does not unwrap: the header was tampered with or belongs to another device.")
        }
        let keys = FileKeys(fileKey: fileKey)
        fileKey.wipe()
        guard slot.verify(macKey: keys.macKey) else {
            keys.wipe()
            throw .integrity("The file header does not authenticate: it was tampered with.")
        }
        return keys
    }

    private static func classBWrappingKey(
        secret: SecureBytes, peer: Data, ephemeralPublic: Data, classPublic: Data
    ) throws(DataProtectionError) -> SecureBytes {
        let shared: SecureBytes
        do {
            shared = try X25519.sharedSecret(secretKey: secret, publicKey: peer)
        } catch {
            throw .integrity("The file's ephemeral public key is invalid: the header was tampered with.")
        }
        defer { shared.wipe() }
        return BLAKE2b.deriveKey(key: shared, [.label(Label.classBWrap), .data(Data([0])), .data(ephemeralPublic), .data(classPublic)])
    }

    private static func seal(_ fileKey: SecureBytes, with key: SecureBytes, header: FileHeader) throws(DataProtectionError) -> Data {
        do {
            return try XChaCha20Poly1305.seal(fileKey, using: key, nonce: header.wrapNonce, authenticating: header.wrapAssociatedData)
        } catch {
            throw .integrity("Could not wrap the file key: \(error).")
        }
    }

    private static func open(_ header: FileHeader, with key: SecureBytes) throws(DataProtectionError) -> SecureBytes? {
        try? XChaCha20Poly1305.openSecret(header.wrappedKey, using: key, nonce: header.wrapNonce,
                                          authenticating: header.wrapAssociatedData)
    }
}
