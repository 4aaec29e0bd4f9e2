import Foundation
import Testing
@testable import SodiumBridge

@Suite("X25519, Argon2id, BLAKE2b, SecureBytes")
struct PrimitiveTests {
    @Test("X25519 agreement is symmetric; a low-order public key is refused")
    func x25519() throws {
        let alice = X25519.generateKeyPair()
        let bob = X25519.generateKeyPair()
        let one = try X25519.sharedSecret(secretKey: alice.secretKey, publicKey: bob.publicKey)
        let two = try X25519.sharedSecret(secretKey: bob.secretKey, publicKey: alice.publicKey)
        #expect(one.constantTimeEquals(two))
        #expect(X25519.publicKey(for: alice.secretKey) == alice.publicKey)
        #expect(throws: SodiumError.invalidPublicKey) {
            try X25519.sharedSecret(secretKey: alice.secretKey, publicKey: Data(count: 32))
        }
    }

    @Test("Argon2id is deterministic, salted, and refuses bad parameters")
    func argon2id() throws {
        let passcode = SecureBytes(copyingUTF8: "1234")
        let salt = Data(repeating: 1, count: 16)
        let a = try Argon2id.deriveKey(passcode: passcode, salt: salt, operations: 1, memory: 8192)
        let b = try Argon2id.deriveKey(passcode: passcode, salt: salt, operations: 1, memory: 8192)
        let c = try Argon2id.deriveKey(passcode: passcode, salt: Data(repeating: 2, count: 16), operations: 1, memory: 8192)
        #expect(a.constantTimeEquals(b))
        #expect(!a.constantTimeEquals(c))
        #expect(throws: SodiumError.self) { try Argon2id.deriveKey(passcode: passcode, salt: salt, operations: 0, memory: 8192) }
        #expect(throws: SodiumError.self) { try Argon2id.deriveKey(passcode: passcode, salt: Data(count: 8), operations: 1, memory: 8192) }
    }

    @Test("BLAKE2b-256 of the empty string; keyed differs; parts concatenate")
    func blake2b() {
        #expect(BLAKE2b.hash([]) == Data(hex: "0e5751c026e543b2e8ab2eb06099daa1d1e5df47778f7787faab45cdf12fe3a8"))
        let key = SecureBytes.random(count: 32)
        #expect(BLAKE2b.mac(key: key, []) != BLAKE2b.hash([]))
        #expect(BLAKE2b.mac(key: key, [.label("ab"), .data(Data("c".utf8))]) == BLAKE2b.mac(key: key, [.data(Data("abc".utf8))]))
        #expect(BLAKE2b.deriveKey(key: key, [.label("x")]).copyBytes(in: 0..<32) == BLAKE2b.mac(key: key, [.label("x")]))
    }

    @Test("SecureBytes: wipe zeroes, comparisons are by content, nothing secret in descriptions")
    func secureBytes() {
        let secret = SecureBytes(count: 4) { $0.copyBytes(from: [1, 2, 3, 4]) }
        #expect(!secret.isZero)
        #expect(secret.hasPrefix(Data([1, 2])))
        #expect(!secret.hasPrefix(Data([2])))
        #expect(secret.constantTimeEquals(SecureBytes(copying: secret)))
        #expect(!secret.constantTimeEquals(SecureBytes(count: 3)))
        #expect(!"\(secret)".contains("1, 2") && "\(secret)".contains("redacted"))
        secret.wipe()
        #expect(secret.isZero)
    }
}
