import DataProtection
import Foundation
import SodiumBridge

/// What opens a backup: an age X25519 secret key (`AGE-SECRET-KEY-1…`, as in an identity
/// file made by `age-keygen`) or a passphrase. The secret lives in wiped secure memory.
public struct AgeIdentity: Sendable, CustomStringConvertible {
    enum Kind: Sendable {
        case x25519(secretKey: SecureBytes, publicKey: Data)
        case scrypt(passphrase: Passcode, maxLogN: Int)
    }

    let kind: Kind

    /// The identities of an identity file (age's `-i`): `AGE-SECRET-KEY-1…` lines; empty
    /// lines and lines starting with `#` are ignored.
    ///
    /// - Throws: `invalidArgument` for any other line (the line is not shown).
    public static func identities(inFile contents: Passcode) throws(DataProtectionError) -> [AgeIdentity] {
        var identities: [AgeIdentity] = []
        // The file's bytes are secret: parsed line by line in secure memory.
        let lines = contents.bytes.withUnsafeBytes { raw in
            raw.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false).map { line in
                SecureBytes(count: line.count) { $0.copyBytes(from: line) }
            }
        }
        for (number, line) in lines.enumerated() {
            let text = line.withUnsafeBytes { String(decoding: $0, as: UTF8.self) }
                .trimmingCharacters(in: .whitespaces.union(CharacterSet(charactersIn: "\r")))
            if text.isEmpty || text.hasPrefix("#") { continue }
            guard text.hasPrefix("AGE-SECRET-KEY-1"), var decoded = Bech32.decode(text), decoded.hrp == "age-secret-key-",
                  decoded.data.count == X25519.keyByteCount, text == text.uppercased()
            else {
                throw DataProtectionError(.invalidArgument, "Line \(number + 1) of the identity file is not an age X25519 identity (AGE-SECRET-KEY-1…).",
                                          hint: "Pass the file `age-keygen -o` wrote.")
            }
            let secret = SecureBytes(count: X25519.keyByteCount) { $0.copyBytes(from: decoded.data) }
            for index in decoded.data.indices { decoded.data[index] = 0 }
            identities.append(AgeIdentity(kind: .x25519(secretKey: secret, publicKey: X25519.publicKey(for: secret))))
        }
        guard !identities.isEmpty else {
            throw DataProtectionError(.invalidArgument, "The identity file holds no identity.")
        }
        return identities
    }

    /// A passphrase identity; archives whose scrypt work factor exceeds `maxWorkFactor` are
    /// refused before any work (age's own limit is 22 when decrypting).
    public init(passphrase: Passcode, maxWorkFactor: Int = 22) {
        kind = .scrypt(passphrase: passphrase, maxLogN: maxWorkFactor)
    }

    /// A new X25519 identity (what `age-keygen` makes).
    public static func generate() -> AgeIdentity {
        let (publicKey, secret) = X25519.generateKeyPair()
        return AgeIdentity(kind: .x25519(secretKey: secret, publicKey: publicKey))
    }

    private init(kind: Kind) { self.kind = kind }

    /// The recipient of an X25519 identity (`age1…`); `nil` for a passphrase.
    public var recipient: AgeRecipient? {
        guard case let .x25519(_, publicKey) = kind else { return nil }
        return try? AgeRecipient(Bech32.encode(hrp: "age", data: publicKey))
    }

    /// The identity file line (`AGE-SECRET-KEY-1…`) in secure memory; `nil` for a passphrase.
    public var identityFileLine: Passcode? {
        guard case let .x25519(secretKey, _) = kind else { return nil }
        let text = secretKey.withUnsafeBytes { Bech32.encode(hrp: "AGE-SECRET-KEY-", data: $0, uppercase: true) }
        return Passcode(text + "\n")
    }

    /// The public key for an X25519 identity, never the secret.
    public var description: String {
        switch kind {
        case .x25519: "age identity of \(recipient?.description ?? "?")"
        case .scrypt: "passphrase identity"
        }
    }

    /// The file key from `stanza` if it is addressed to this identity: `nil` when it is not
    /// (another recipient's stanza, or another type); `integrityFailure` when it is of this
    /// identity's type yet malformed in a way age refuses.
    func unwrap(_ stanza: AgeStanza) throws(DataProtectionError) -> SecureBytes? {
        switch kind {
        case let .x25519(secretKey, publicKey):
            guard stanza.type == "X25519" else { return nil }
            guard stanza.arguments.count == 1, let share = AgeFormat.unbase64(stanza.arguments[0]), share.count == 32,
                  stanza.body.count == 32
            else { throw AgeFormat.malformed("an X25519 stanza is malformed") }
            guard let shared = try? X25519.sharedSecret(secretKey: secretKey, publicKey: share) else {
                throw AgeFormat.malformed("an X25519 stanza has a low-order share")
            }
            let wrapKey = HKDFSHA256.deriveKey(inputKey: shared, salt: share + publicKey, info: AgeFormat.x25519Label, byteCount: 32)
            return try? ChaCha20Poly1305.openSecret(stanza.body, using: wrapKey, nonce: AgeFormat.zeroNonce)
        case let .scrypt(passphrase, maxLogN):
            guard stanza.type == "scrypt" else { return nil }
            guard stanza.arguments.count == 2, let salt = AgeFormat.unbase64(stanza.arguments[0]), salt.count == 16,
                  let logN = AgeFormat.decimal(stanza.arguments[1]), stanza.body.count == 32
            else { throw AgeFormat.malformed("a scrypt stanza is malformed") }
            guard logN <= maxLogN, logN > 0 else {
                throw DataProtectionError(.integrityFailure, "The archive's scrypt work factor \(logN) exceeds the limit \(maxLogN).")
            }
            let wrapKey = try AgeFormat.scryptKey(passphrase: passphrase, salt: salt, logN: logN)
            guard let fileKey = try? ChaCha20Poly1305.openSecret(stanza.body, using: wrapKey, nonce: AgeFormat.zeroNonce) else {
                throw DataProtectionError(.integrityFailure, "The passphrase does not open this archive (or the archive was tampered with).")
            }
            return fileKey
        }
    }
}
