import CSodium
import Foundation

/// Keyed BLAKE2b (`crypto_generichash`), used for key derivation and MACs.
///
/// Inputs are given as ``Part``s so that secret and public pieces can be
/// hashed together without copying a secret into a `Data`.
package enum BLAKE2b {
    /// One piece of hashed input.
    package enum Part {
        /// Public bytes.
        case data(Data)
        /// Secret bytes.
        case secret(SecureBytes)
        /// The UTF-8 bytes of a label.
        case label(String)
    }

    /// Smallest and largest output and key sizes (16 and 64 bytes).
    package static let minimumByteCount = Int(crypto_generichash_BYTES_MIN)
    package static let maximumByteCount = Int(crypto_generichash_BYTES_MAX)

    /// Keyed BLAKE2b of the concatenated parts, as a secret (a derived key).
    package static func deriveKey(byteCount: Int = 32, key: SecureBytes, _ parts: [Part]) -> SecureBytes {
        let output = SecureBytes(count: byteCount)
        output.withUnsafeMutableBytes { out in hash(into: out, key: key, parts) }
        return output
    }

    /// Keyed BLAKE2b of the concatenated parts into `output` (a derived key, in a buffer the
    /// caller allocated, perhaps together with others), as many bytes as `output` holds.
    package static func deriveKey(into output: SecureBytes, key: SecureBytes, _ parts: [Part]) {
        output.withUnsafeMutableBytes { out in hash(into: out, key: key, parts) }
    }

    /// Keyed BLAKE2b of the concatenated parts, as public bytes (a MAC or an identifier).
    package static func mac(byteCount: Int = 32, key: SecureBytes, _ parts: [Part]) -> Data {
        var output = Data(count: byteCount)
        output.withUnsafeMutableBytes { out in hash(into: out, key: key, parts) }
        return output
    }

    /// Keyed BLAKE2b of public bytes gathered in an array (a journal's body), hashed where they lie.
    package static func mac(byteCount: Int = 32, key: SecureBytes, bytes: [UInt8]) -> Data {
        var output = Data(count: byteCount)
        output.withUnsafeMutableBytes { out in bytes.withUnsafeBytes { m in digest(into: out, key: key, message: m) } }
        return output
    }

    /// Unkeyed BLAKE2b of the concatenated parts (fingerprints of public data).
    package static func hash(byteCount: Int = 32, _ parts: [Part]) -> Data {
        var output = Data(count: byteCount)
        output.withUnsafeMutableBytes { out in hash(into: out, key: nil, parts) }
        return output
    }

    private static func hash(into out: UnsafeMutableRawBufferPointer, key: SecureBytes?, _ parts: [Part]) {
        // Inputs are small (keys, labels, identifiers): gather them in secure memory
        // and hash in one call, so no hash state holding key material outlives this call.
        // Public parts only (identifiers, labels, header fields, names the caller holds in a
        // `String` anyway): the message needs no secure memory.
        if !parts.contains(where: { if case .secret = $0 { true } else { false } }) {
            var message: [UInt8] = []
            for part in parts {
                switch part {
                case .data(let data): message += data
                case .label(let label): message += Array(label.utf8)
                case .secret: preconditionFailure("unreachable")
                }
            }
            message.withUnsafeBytes { m in digest(into: out, key: key, message: m) }
            return
        }
        // One secure allocation for the whole message (each costs several system calls).
        gathered(parts).withUnsafeBytes { m in digest(into: out, key: key, message: m) }
    }

    /// The concatenated parts in one new secure buffer (a message that holds secrets).
    package static func gathered(_ parts: [Part]) -> SecureBytes {
        let total = parts.reduce(0) { total, part in
            switch part {
            case .secret(let secret): total + secret.count
            case .data(let data): total + data.count
            case .label(let label): total + label.utf8.count
            }
        }
        return SecureBytes(count: total) { out in
            var offset = 0
            for part in parts {
                switch part {
                case .secret(let secret):
                    secret.withUnsafeBytes { UnsafeMutableRawBufferPointer(rebasing: out[offset..<offset + $0.count]).copyMemory(from: $0) }
                    offset += secret.count
                case .data(let data):
                    UnsafeMutableRawBufferPointer(rebasing: out[offset..<offset + data.count]).copyBytes(from: data)
                    offset += data.count
                case .label(let label):
                    UnsafeMutableRawBufferPointer(rebasing: out[offset..<offset + label.utf8.count]).copyBytes(from: label.utf8)
                    offset += label.utf8.count
                }
            }
        }
    }

    /// The one call of `crypto_generichash`, and the checks of its sizes.
    private static func digest(into out: UnsafeMutableRawBufferPointer, key: SecureBytes?, message m: UnsafeRawBufferPointer) {
        Sodium.ensureInitialized()
        precondition(out.count >= minimumByteCount && out.count <= maximumByteCount, "BLAKE2b output size out of range")
        if let key {
            precondition(key.count >= Int(crypto_generichash_KEYBYTES_MIN) && key.count <= Int(crypto_generichash_KEYBYTES_MAX),
                         "BLAKE2b key size out of range")
        }
        let input = m.baseAddress?.assumingMemoryBound(to: UInt8.self)
        if let key {
            key.withUnsafeBytes { k in
                _ = crypto_generichash(
                    out.baseAddress!.assumingMemoryBound(to: UInt8.self), out.count,
                    input, UInt64(m.count),
                    k.baseAddress!.assumingMemoryBound(to: UInt8.self), k.count)
            }
        } else {
            _ = crypto_generichash(out.baseAddress!.assumingMemoryBound(to: UInt8.self), out.count, input, UInt64(m.count), nil, 0)
        }
    }
}
