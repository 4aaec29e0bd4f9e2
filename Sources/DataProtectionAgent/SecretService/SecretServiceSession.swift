import CryptoBridge
import DBusBridge
import DataProtection
import DataProtectionSQLite
import Foundation
import SodiumBridge

/// A Secret Service session (`OpenSession`): how secrets cross the bus between one client and
/// the provider. `plain` carries them as they are; `dh-ietf1024-sha256-aes128-cbc-pkcs7`
/// encrypts them under a key agreed in the RFC 2409 1024-bit group and derived with
/// HKDF-SHA-256 (empty salt and info, 16 bytes), as libsecret and gnome-keyring do.
final class SecretServiceSession: Sendable {
    /// The session algorithms served.
    enum Algorithm: String, Sendable {
        case plain
        case dh = "dh-ietf1024-sha256-aes128-cbc-pkcs7"
    }

    let path: String
    /// The unique bus name of the client that opened it: only it may use it.
    let owner: String?
    let algorithm: Algorithm
    /// The AES-128 key (`dh` only), in secure memory.
    private let key: SecureBytes?

    private init(path: String, owner: String?, algorithm: Algorithm, key: SecureBytes?) {
        self.path = path
        self.owner = owner
        self.algorithm = algorithm
        self.key = key
    }

    /// Opens a session of `algorithm` with the client's `input`; the session and the output
    /// for the client (`""` for `plain`, this side's public key for `dh`).
    static func open(algorithm name: String, input: DBusValue, path: String, owner: String?) throws(DBusError) -> (SecretServiceSession, DBusValue) {
        guard let algorithm = Algorithm(rawValue: name) else {
            throw DBusError(name: "org.freedesktop.DBus.Error.NotSupported",
                            message: "The algorithm \(name) is not supported (plain and dh-ietf1024-sha256-aes128-cbc-pkcs7 are).")
        }
        switch algorithm {
        case .plain:
            return (SecretServiceSession(path: path, owner: owner, algorithm: .plain, key: nil), .variant(.string("")))
        case .dh:
            guard let peer = input.unwrapped.bytesValue else {
                throw DBusError.invalidArguments("dh-ietf1024-sha256-aes128-cbc-pkcs7 takes the client's public key as bytes (ay).")
            }
            do {
                let pair = try ModularDiffieHellman()
                let shared = try pair.sharedSecret(peerPublicKey: peer)
                defer { shared.wipe() }
                let key = try HKDF.sha256(inputKey: shared, length: AES128CBC.keyCount)
                return (SecretServiceSession(path: path, owner: owner, algorithm: .dh, key: key), .variant(.bytes(Data(pair.publicKey))))
            } catch {
                throw DBusError.invalidArguments("The session cannot be opened: \(error).")
            }
        }
    }

    /// The secret a client sent, a Secret Service `Secret` struct `(oayays)` of this session.
    func decode(_ fields: [DBusValue]) throws(DBusError) -> ItemSecret {
        guard fields.count == 4, let parameters = fields[1].bytesValue, let value = fields[2].bytesValue else {
            throw DBusError.invalidArguments("A secret is a (oayays) structure.")
        }
        switch algorithm {
        case .plain:
            return ItemSecret(bytes: value)
        case .dh:
            guard let key else { throw DBusError.invalidArguments("The session has no key.") }
            do {
                return ItemSecret(secure: try AES128CBC.decrypt(Array(value), key: key, iv: Array(parameters)))
            } catch {
                throw DBusError.invalidArguments("The secret does not decrypt under the session's key: \(error).")
            }
        }
    }

    /// `secret` as a Secret Service `Secret` struct `(oayays)` for this session's client.
    func encode(_ secret: ItemSecret, contentType: String = "text/plain") throws(DBusError) -> DBusValue {
        let parameters: Data
        let value: Data
        switch algorithm {
        case .plain:
            parameters = Data()
            value = secret.withUnsafeBytes { Data($0) }
        case .dh:
            guard let key else { throw DBusError.invalidArguments("The session has no key.") }
            let iv = SecureBytes.random(count: AES128CBC.blockCount).withUnsafeBytes { Array($0) }
            do {
                value = Data(try AES128CBC.encrypt(secret.bytes, key: key, iv: iv))
            } catch {
                throw DBusError(name: "org.freedesktop.DBus.Error.Failed", message: "The secret cannot be encrypted: \(error).")
            }
            parameters = Data(iv)
        }
        return .structure([.objectPath(path), .bytes(parameters), .bytes(value), .string(contentType)])
    }

    /// Wipes the key (at `Close` or when the provider stops).
    func close() {
        key?.wipe()
    }
}
