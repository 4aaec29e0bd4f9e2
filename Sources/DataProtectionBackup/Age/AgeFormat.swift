import DataProtection
import Foundation
import SodiumBridge

/// The constants and encodings of age v1 (C2SP age: https://age-encryption.org/v1), as
/// `Keys/backup-format.md` profiles them.
enum AgeFormat {
    /// The first line of every header.
    static let versionLine = Data("age-encryption.org/v1".utf8)
    /// HKDF info of the X25519 stanza's wrapping key.
    static let x25519Label = Data("age-encryption.org/v1/X25519".utf8)
    /// Prefix of the scrypt salt.
    static let scryptLabel = Data("age-encryption.org/v1/scrypt".utf8)
    /// HKDF info of the header MAC key and of the payload key.
    static let headerLabel = Data("header".utf8)
    static let payloadLabel = Data("payload".utf8)
    /// The file key: 16 bytes.
    static let fileKeyByteCount = 16
    /// The payload nonce (HKDF salt of the payload key): 16 bytes.
    static let payloadNonceByteCount = 16
    /// STREAM chunk of plaintext: 64 KiB.
    static let chunkByteCount = 64 * 1024
    /// A sealed chunk: plaintext and the Poly1305 tag.
    static let sealedChunkByteCount = chunkByteCount + ChaCha20Poly1305.tagByteCount
    /// Stanza bodies are wrapped at 64 columns of base64.
    static let bodyColumns = 64
    /// The most a header may hold before the reader gives up (age's own headers are < 1 KiB
    /// per recipient).
    static let headerByteLimit = 1 << 20
    /// ChaCha20-Poly1305 under a single-use key (stanza bodies).
    static let zeroNonce = Data(count: 12)

    /// Standard base64 without padding (RFC 4648 §4, age's encoding).
    static func base64(_ data: Data) -> String {
        var text = data.base64EncodedString()
        while text.hasSuffix("=") { text.removeLast() }
        return text
    }

    /// Canonical unpadded base64 only: padding, other alphabets, whitespace and non-zero
    /// trailing bits are refused, so one header has one encoding.
    static func unbase64(_ text: String) -> Data? {
        guard !text.contains("="), text.utf8.count % 4 != 1 else { return nil }
        let padded = text + String(repeating: "=", count: (4 - text.utf8.count % 4) % 4)
        guard let data = Data(base64Encoded: padded), base64(data) == text else { return nil }
        return data
    }

    /// A decimal without sign or leading zeros.
    static func decimal(_ text: String) -> Int? {
        guard !text.isEmpty, text.utf8.count <= 2, text.utf8.allSatisfy({ (48...57).contains($0) }),
              text == "0" || !text.hasPrefix("0") else { return nil }
        return Int(text)
    }

    static func scryptKey(passphrase: Passcode, salt: Data, logN: Int) throws(DataProtectionError) -> SecureBytes {
        do {
            return try Scrypt.deriveKey(password: passphrase.bytes, salt: scryptLabel + salt, logN: logN)
        } catch {
            throw DataProtectionError(.ioFailure, "scrypt with work factor \(logN) failed (not enough memory?).")
        }
    }

    /// Runs a libsodium call whose only failures are programming errors here (sizes are fixed).
    static func sodium<T>(_ body: () throws(SodiumError) -> T) throws(DataProtectionError) -> T {
        do { return try body() } catch {
            throw DataProtectionError(.integrityFailure, "A cryptographic operation failed: \(error).")
        }
    }

    static func malformed(_ what: String) -> DataProtectionError {
        DataProtectionError(.integrityFailure, "The archive is not a valid age file: \(what).",
                            hint: "It is truncated, tampered with, or not an age v1 file.")
    }

    /// The header MAC key: HKDF-SHA-256(file key, salt: empty, info: "header").
    static func headerKey(_ fileKey: SecureBytes) -> SecureBytes {
        HKDFSHA256.deriveKey(inputKey: fileKey, salt: Data(), info: headerLabel, byteCount: 32)
    }

    /// The payload key: HKDF-SHA-256(file key, salt: nonce, info: "payload").
    static func payloadKey(_ fileKey: SecureBytes, nonce: Data) -> SecureBytes {
        HKDFSHA256.deriveKey(inputKey: fileKey, salt: nonce, info: payloadLabel, byteCount: 32)
    }

    /// The STREAM nonce of chunk `counter`: an 11-byte big-endian counter and the last-chunk flag.
    static func chunkNonce(_ counter: UInt64, last: Bool) -> Data {
        var nonce = Data(count: 12)
        for index in 0..<8 { nonce[3 + index] = UInt8(truncatingIfNeeded: counter >> (8 * (7 - UInt64(index)))) }
        nonce[11] = last ? 1 : 0
        return nonce
    }
}

/// One recipient stanza of an age header.
struct AgeStanza: Sendable, Equatable {
    var type: String
    var arguments: [String]
    var body: Data

    /// `-> type args…\n` and the body in lines of 64 base64 columns, the last one shorter
    /// (empty when the body fills its lines).
    var encoded: Data {
        var text = "-> " + ([type] + arguments).joined(separator: " ") + "\n"
        let base64 = Array(AgeFormat.base64(body).utf8)
        var index = 0
        while base64.count - index >= AgeFormat.bodyColumns {
            text += String(decoding: base64[index..<(index + AgeFormat.bodyColumns)], as: UTF8.self) + "\n"
            index += AgeFormat.bodyColumns
        }
        text += String(decoding: base64[index...], as: UTF8.self) + "\n"
        return Data(text.utf8)
    }
}
