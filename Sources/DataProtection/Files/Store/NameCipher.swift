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
        return try device.withMetadataKeys(derivedFor: [Label.siv, Label.name]) { keys throws(DataProtectionError) -> String in
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
                  (1...149).contains(plaintext.count), name != ".", name != "..", !plaintext.contains(0x2F), !plaintext.contains(0)
            else { return nil }
            return name
        }
    }
}
