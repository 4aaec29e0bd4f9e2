import Foundation
import Testing
@testable import SodiumBridge

/// XChaCha20-Poly1305: the whole known answer of draft-irtf-cfrg-xchacha-03
/// A.3.1 (every ciphertext byte, not only the ends), and the failure classes
/// kept apart (a wrong size is never an authentication failure, and back).
@Suite("XChaCha20-Poly1305 vector and failure classes")
struct XChaCha20Poly1305VectorTests {
    static let key = SecureBytes(count: 32) { $0.copyBytes(from: (0x80...0x9F).map { UInt8($0) }) }
    static let nonce = Data((0x40...0x57).map { UInt8($0) })
    static let associatedData = Data(hex: "50515253c0c1c2c3c4c5c6c7")
    static let plaintext = Data(
        "Ladies and Gentlemen of the class of '99: If I could offer you only one tip for the future, sunscreen would be it.".utf8)
    static let ciphertext = Data(hex: """
        bd6d179d3e83d43b9576579493c0e939572a1700252bfaccbed2902c21396cbb\
        731c7f1b0b4aa6440bf3a82f4eda7e39ae64c6708c54c216cb96b72e1213b452\
        2f8c9ba40db5d945b11b69b982c1bb9e3f3fac2bc369488f76b2383565d3fff9\
        21f9664c97637da9768812f615c68b13b52e
        """)
    static let tag = Data(hex: "c0875924c1c7987947deafd8780acf49")

    @Test("A.3.1: seal gives exactly the published ciphertext and tag")
    func sealVector() throws {
        let sealed = try XChaCha20Poly1305.seal(Self.plaintext, using: Self.key, nonce: Self.nonce, authenticating: Self.associatedData)
        #expect(Self.ciphertext.count == Self.plaintext.count)
        #expect(sealed == Self.ciphertext + Self.tag)
    }

    @Test("A.3.1: the published box opens to the plaintext, into public or secure memory")
    func openVector() throws {
        let box = Self.ciphertext + Self.tag
        #expect(try XChaCha20Poly1305.open(box, using: Self.key, nonce: Self.nonce, authenticating: Self.associatedData) == Self.plaintext)
        let secret = try XChaCha20Poly1305.openSecret(box, using: Self.key, nonce: Self.nonce, authenticating: Self.associatedData)
        #expect(secret.constantTimeEquals(SecureBytes(count: Self.plaintext.count) { $0.copyBytes(from: Self.plaintext) }))
    }

    @Test("every single-bit flip anywhere in the box fails authentication, opening publicly or secretly")
    func everyBitOfTheBox() throws {
        let box = Self.ciphertext + Self.tag
        for index in box.indices {
            var flipped = box
            flipped[index] ^= 0x10
            #expect(throws: SodiumError.authenticationFailed, "byte \(index)") {
                try XChaCha20Poly1305.open(flipped, using: Self.key, nonce: Self.nonce, authenticating: Self.associatedData)
            }
            #expect(throws: SodiumError.authenticationFailed, "byte \(index)") {
                try XChaCha20Poly1305.openSecret(flipped, using: Self.key, nonce: Self.nonce, authenticating: Self.associatedData)
            }
        }
    }

    @Test("a wrong key, a truncated box, or a dropped associated data fails authentication")
    func otherForgeries() throws {
        let box = Self.ciphertext + Self.tag
        #expect(throws: SodiumError.authenticationFailed) {
            try XChaCha20Poly1305.open(box, using: SecureBytes.random(count: 32), nonce: Self.nonce, authenticating: Self.associatedData)
        }
        #expect(throws: SodiumError.authenticationFailed) {
            try XChaCha20Poly1305.open(box.dropLast(), using: Self.key, nonce: Self.nonce, authenticating: Self.associatedData)
        }
        #expect(throws: SodiumError.authenticationFailed) {
            try XChaCha20Poly1305.open(box, using: Self.key, nonce: Self.nonce, authenticating: Data())
        }
    }

    @Test("boxes shorter than the 16-byte tag are authentication failures, not size errors", arguments: [0, 1, 15])
    func shortBox(_ count: Int) {
        #expect(throws: SodiumError.authenticationFailed) {
            try XChaCha20Poly1305.open(Data(count: count), using: Self.key, nonce: Self.nonce, authenticating: Data())
        }
        #expect(throws: SodiumError.authenticationFailed) {
            try XChaCha20Poly1305.openSecret(Data(count: count), using: Self.key, nonce: Self.nonce, authenticating: Data())
        }
    }

    @Test("an empty plaintext seals to a bare tag and opens back to nothing")
    func emptyPlaintext() throws {
        let sealed = try XChaCha20Poly1305.seal(Data(), using: Self.key, nonce: Self.nonce, authenticating: Data())
        #expect(sealed.count == XChaCha20Poly1305.tagByteCount)
        #expect(try XChaCha20Poly1305.open(sealed, using: Self.key, nonce: Self.nonce, authenticating: Data()).isEmpty)
    }

    @Test("wrong key sizes are invalidLength on every entry point", arguments: [0, 16, 31, 33, 64])
    func keySizes(_ count: Int) {
        let key = SecureBytes(count: count)
        let box = Self.ciphertext + Self.tag
        let expected = SodiumError.invalidLength(what: "XChaCha20-Poly1305 key", expected: 32, actual: count)
        #expect(throws: expected) { try XChaCha20Poly1305.seal(Data(), using: key, nonce: Self.nonce, authenticating: Data()) }
        #expect(throws: expected) { try XChaCha20Poly1305.seal(SecureBytes(count: 1), using: key, nonce: Self.nonce, authenticating: Data()) }
        #expect(throws: expected) { try XChaCha20Poly1305.open(box, using: key, nonce: Self.nonce, authenticating: Data()) }
        #expect(throws: expected) { try XChaCha20Poly1305.openSecret(box, using: key, nonce: Self.nonce, authenticating: Data()) }
    }

    @Test("wrong nonce sizes are invalidLength, even for a box too short to authenticate", arguments: [0, 12, 23, 25])
    func nonceSizes(_ count: Int) {
        let expected = SodiumError.invalidLength(what: "XChaCha20-Poly1305 nonce", expected: 24, actual: count)
        #expect(throws: expected) { try XChaCha20Poly1305.seal(Data(), using: Self.key, nonce: Data(count: count), authenticating: Data()) }
        #expect(throws: expected) { try XChaCha20Poly1305.open(Data(count: 3), using: Self.key, nonce: Data(count: count), authenticating: Data()) }
    }

    @Test("random nonces are 24 bytes and do not repeat")
    func randomNonces() {
        let nonces = (0..<100).map { _ in XChaCha20Poly1305.randomNonce() }
        #expect(nonces.allSatisfy { $0.count == 24 })
        #expect(Set(nonces).count == nonces.count)
    }
}
