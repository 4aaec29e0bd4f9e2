import Foundation
import SodiumBridge

/// Encrypts file names deterministically (so lookups work) with the store's
/// metadata key: a synthetic nonce `BLAKE2b-192(K_siv, directory id || name)`,
/// then XChaCha20-Poly1305 under `K_name` with the directory id as associated
/// data. The on-disk name is `base64url(nonce || ciphertext || tag)`, unpadded.
///
/// The same name in two directories encrypts differently, and an entry moved
/// to another directory on disk no longer decrypts.
package enum NameCipher {
    enum Label {
        static let siv = "DataProtection v1 name siv"
        static let name = "DataProtection v1 name"
    }

    package static func encrypt(_ name: String, directoryID: Data, device: Device) throws(DataProtectionError) -> String {
        let plaintext = Data(name.utf8)
        // Only what `decrypt` accepts back (file-format.md §10.1); store paths are checked before.
        guard isValid(name, plaintext) else {
            throw DataProtectionError(.invalidPath, "\(plaintext.count > StorePath.maximumNameLength ? "A name of \(plaintext.count) bytes is too long (at most \(StorePath.maximumNameLength))" : "\"\(name)\" is not a valid name").")
        }
        return try seal(plaintext, directoryID: directoryID, device: device)
    }

    /// The encrypted form of any bytes, valid name or not: what a buggy writer (or the tests of
    /// `decrypt`'s refusals) would put on disk.
    static func seal(_ plaintext: Data, directoryID: Data, device: Device) throws(DataProtectionError) -> String {
        try device.withMetadataKeys(derivedFor: [Label.siv, Label.name]) { keys throws(DataProtectionError) -> String in
            let sivKey = keys[0], nameKey = keys[1]
            let nonce = BLAKE2b.mac(byteCount: 24, key: sivKey, [.data(directoryID), .data(plaintext)])
            do {
                let sealed = try XChaCha20Poly1305.seal(plaintext, using: nameKey, nonce: nonce,
                                                        authenticating: Data("DPNM".utf8) + directoryID)
                return Base64URL.encode(nonce + sealed)
            } catch {
                throw .integrity("Could not encrypt a file name: \(error).")
            }
        }
    }

    /// The name, or `nil` if `encoded` is not a name of this directory under this key.
    package static func decrypt(_ encoded: String, directoryID: Data, device: Device) throws(DataProtectionError) -> String? {
        guard let data = Base64URL.decode(encoded), data.count >= 40 else { return nil }
        return try device.withMetadataKeys(derivedFor: [Label.siv, Label.name]) { keys throws(DataProtectionError) -> String? in
            let sivKey = keys[0], nameKey = keys[1]
            let nonce = data.prefix(24)
            guard let plaintext = try? XChaCha20Poly1305.open(Data(data.dropFirst(24)), using: nameKey, nonce: Data(nonce),
                                                               authenticating: Data("DPNM".utf8) + directoryID),
                  ConstantTime.equals(BLAKE2b.mac(byteCount: 24, key: sivKey, [.data(directoryID), .data(plaintext)]), Data(nonce)),
                  let name = String(data: plaintext, encoding: .utf8),
                  // A name no writer could have made (file-format.md §10.1) does not decrypt either.
                  isValid(name, plaintext)
            else { return nil }
            return name
        }
    }

    /// A name a writer may make: 1 to 149 bytes of UTF-8, neither `.` nor `..`, no `/`, no NUL.
    private static func isValid(_ name: String, _ bytes: Data) -> Bool {
        (1...StorePath.maximumNameLength).contains(bytes.count) && name != "." && name != ".."
            && !bytes.contains(0x2F) && !bytes.contains(0)
    }
}
