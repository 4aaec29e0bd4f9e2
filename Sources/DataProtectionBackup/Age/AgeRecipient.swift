import DataProtection
import Foundation
import SodiumBridge

/// Someone a backup is encrypted to: an age X25519 public key (`age1…`) or a passphrase
/// (age's `scrypt` recipient). See `Keys/backup-format.md`, "The age profile".
public struct AgeRecipient: Sendable, CustomStringConvertible {
    enum Kind: Sendable {
        case x25519(publicKey: Data)
        case scrypt(passphrase: Passcode, logN: Int)
    }

    let kind: Kind

    /// age's default scrypt work factor, log2(N) = 18 (about 1 s and 256 MiB).
    public static let defaultWorkFactor = 18

    /// The recipient of an `age1…` public key (Bech32, as `age-keygen` prints it).
    ///
    /// - Throws: `invalidArgument` for anything else.
    public init(_ text: String) throws(DataProtectionError) {
        guard let (hrp, data) = Bech32.decode(text), hrp == "age", data.count == X25519.keyByteCount, text == text.lowercased() else {
            throw DataProtectionError(.invalidArgument, "\(text.prefix(80)) is not an age X25519 recipient (age1…).",
                                      hint: "Make one with `age-keygen` (its \"public key\" line), or pass -R with a recipients file.")
        }
        kind = .x25519(publicKey: Data(data))
    }

    /// A passphrase recipient (age `scrypt` stanza) with work factor log2(N) = `workFactor`.
    /// An archive with a passphrase recipient has no other recipient (the age specification).
    public init(passphrase: Passcode, workFactor: Int = AgeRecipient.defaultWorkFactor) throws(DataProtectionError) {
        guard (1...22).contains(workFactor) else {
            throw DataProtectionError(.invalidArgument, "The scrypt work factor \(workFactor) is outside 1...22.")
        }
        kind = .scrypt(passphrase: passphrase, logN: workFactor)
    }

    /// The recipients of a recipients file (age's `-R`): one `age1…` per line; empty lines and
    /// lines starting with `#` are ignored.
    public static func recipients(inFile contents: String) throws(DataProtectionError) -> [AgeRecipient] {
        var recipients: [AgeRecipient] = []
        for line in contents.split(separator: "\n", omittingEmptySubsequences: false) {
            let trimmed = line.trimmingCharacters(in: .whitespaces.union(CharacterSet(charactersIn: "\r")))
            if trimmed.isEmpty || trimmed.hasPrefix("#") { continue }
            recipients.append(try AgeRecipient(trimmed))
        }
        guard !recipients.isEmpty else {
            throw DataProtectionError(.invalidArgument, "The recipients file names no recipient.")
        }
        return recipients
    }

    /// `age1…` for an X25519 recipient; `passphrase (scrypt)` otherwise.
    public var description: String {
        switch kind {
        case let .x25519(publicKey): Bech32.encode(hrp: "age", data: publicKey)
        case .scrypt: "passphrase (scrypt)"
        }
    }

    /// The stanza that gives `fileKey` to this recipient.
    func stanza(wrapping fileKey: SecureBytes) throws(DataProtectionError) -> AgeStanza {
        switch kind {
        case let .x25519(publicKey):
            let (share, ephemeral) = X25519.generateKeyPair()
            let shared: SecureBytes
            do { shared = try X25519.sharedSecret(secretKey: ephemeral, publicKey: publicKey) } catch {
                throw DataProtectionError(.invalidArgument, "The recipient \(description) is a low-order point, which age refuses.")
            }
            let wrapKey = HKDFSHA256.deriveKey(inputKey: shared, salt: share + publicKey, info: AgeFormat.x25519Label, byteCount: 32)
            let body = try AgeFormat.sodium { () throws(SodiumError) in
                try ChaCha20Poly1305.seal(fileKey, using: wrapKey, nonce: AgeFormat.zeroNonce)
            }
            return AgeStanza(type: "X25519", arguments: [AgeFormat.base64(share)], body: body)
        case let .scrypt(passphrase, logN):
            let salt = Random.bytes(count: 16)
            let wrapKey = try AgeFormat.scryptKey(passphrase: passphrase, salt: salt, logN: logN)
            let body = try AgeFormat.sodium { () throws(SodiumError) in
                try ChaCha20Poly1305.seal(fileKey, using: wrapKey, nonce: AgeFormat.zeroNonce)
            }
            return AgeStanza(type: "scrypt", arguments: [AgeFormat.base64(salt), String(logN)], body: body)
        }
    }

    /// The passphrase and scrypt work factor of a passphrase recipient (what an agent-side
    /// backup request carries), `nil` for an X25519 one.
    package var passphrase: (passphrase: Passcode, workFactor: Int)? {
        if case let .scrypt(passphrase, logN) = kind { return (passphrase, logN) }
        return nil
    }

    var isPassphrase: Bool {
        if case .scrypt = kind { return true }
        return false
    }
}
