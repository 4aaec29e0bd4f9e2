import Foundation
import Testing
@testable import SodiumBridge

/// X25519: RFC 7748 section 6.1 known answer, symmetry, and refusal of
/// low-order points and wrong sizes.
@Suite("X25519")
struct X25519Tests {
    static func secret(_ hex: String) -> SecureBytes {
        SecureBytes(count: 32) { $0.copyBytes(from: Data(hex: hex)) }
    }

    static let alicePrivate = secret("77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a")
    static let alicePublic = Data(hex: "8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a")
    static let bobPrivate = secret("5dab087e624a8a4b79e17f8b83800ee66f3bb1292618b6fd1c2f8b27ff88e0eb")
    static let bobPublic = Data(hex: "de9edb7d7b7dc1b4d35b61c2ece435373f8343c85b78674dadfc7e146f882b4f")
    static let shared = Data(hex: "4a5d9d5ba4ce2de1728e3bf480350f25e07e21c947d19e3376f09b3c1e161742")

    @Test("RFC 7748 6.1: public keys and the shared secret")
    func rfc7748() throws {
        #expect(X25519.publicKey(for: Self.alicePrivate) == Self.alicePublic)
        #expect(X25519.publicKey(for: Self.bobPrivate) == Self.bobPublic)
        let fromAlice = try X25519.sharedSecret(secretKey: Self.alicePrivate, publicKey: Self.bobPublic)
        let fromBob = try X25519.sharedSecret(secretKey: Self.bobPrivate, publicKey: Self.alicePublic)
        #expect(fromAlice.constantTimeEquals(SecureBytes(count: 32) { $0.copyBytes(from: Self.shared) }))
        #expect(fromAlice.constantTimeEquals(fromBob))
    }

    @Test("fresh key pairs agree, and differ from each other")
    func freshPairs() throws {
        let one = X25519.generateKeyPair(), two = X25519.generateKeyPair()
        #expect(one.publicKey != two.publicKey)
        #expect(one.publicKey.count == 32)
        let a = try X25519.sharedSecret(secretKey: one.secretKey, publicKey: two.publicKey)
        let b = try X25519.sharedSecret(secretKey: two.secretKey, publicKey: one.publicKey)
        #expect(a.constantTimeEquals(b))
        #expect(!a.isZero)
    }

    /// Low-order points of Curve25519 (little-endian u-coordinates): the shared secret would be all zeros.
    static let lowOrderPoints: [Data] = [
        Data(count: 32),                                                                      // 0
        Data([1] + [UInt8](repeating: 0, count: 31)),                                         // 1
        Data(hex: "e0eb7a7c3b41b8ae1656e3faf19fc46ada098deb9c32b1fd866205165f49b800"),      // order 8
        Data(hex: "5f9c95bca3508c24b1d0b1559c83ef5b04445cc4581c8e86d8224eddd09f1157"),      // order 8
        Data(hex: "ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f"),      // p - 1
        Data(hex: "edffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f"),      // p (non-canonical 0)
        Data(hex: "eeffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f"),      // p + 1 (non-canonical 1)
    ]

    @Test("a low-order public key is invalidPublicKey", arguments: lowOrderPoints)
    func lowOrder(_ point: Data) {
        #expect(throws: SodiumError.invalidPublicKey) {
            try X25519.sharedSecret(secretKey: SecureBytes.random(count: 32), publicKey: point)
        }
    }

    @Test("wrong sizes are invalidLength")
    func sizes() {
        let pair = X25519.generateKeyPair()
        #expect(throws: SodiumError.invalidLength(what: "X25519 public key", expected: 32, actual: 31)) {
            try X25519.sharedSecret(secretKey: pair.secretKey, publicKey: pair.publicKey.dropLast())
        }
        #expect(throws: SodiumError.invalidLength(what: "X25519 secret key", expected: 32, actual: 16)) {
            try X25519.sharedSecret(secretKey: SecureBytes(count: 16), publicKey: pair.publicKey)
        }
    }
}
