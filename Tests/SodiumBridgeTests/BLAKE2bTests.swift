import Foundation
import Testing
@testable import SodiumBridge

/// BLAKE2b (`crypto_generichash`): known answers (RFC 7693 appendix A, the
/// reference keyed KAT), keys and parts.
@Suite("BLAKE2b")
struct BLAKE2bTests {
    /// The reference implementation's key: bytes 0x00...0x3f.
    static let referenceKey = SecureBytes(count: 64) { $0.copyBytes(from: (0..<64).map { UInt8($0) }) }

    @Test("unkeyed BLAKE2b-256 of the empty string")
    func emptyString() {
        #expect(BLAKE2b.hash([]) == Data(hex: "0e5751c026e543b2e8ab2eb06099daa1d1e5df47778f7787faab45cdf12fe3a8"))
    }

    @Test("RFC 7693 appendix A: unkeyed BLAKE2b-512 of \"abc\"")
    func rfc7693() {
        #expect(BLAKE2b.hash(byteCount: 64, [.data(Data("abc".utf8))]) == Data(hex: """
            ba80a53f981c4d0d6a2797b69f12f6e94c212f14685ac4b74b12bb6fdbffa2d1\
            7d87c5392aab792dc252d5de4533cc9518d38aa8dbf1925ab92386edd4009923
            """))
    }

    @Test("reference keyed KAT: key 00...3f, empty message, 64 bytes")
    func keyedKnownAnswer() {
        #expect(BLAKE2b.mac(byteCount: 64, key: Self.referenceKey, []) == Data(hex: """
            10ebb67700b1868efb4417987acf4690ae9d972fb7a590c2f02871799aaa4786\
            b5e996e8f0f4eb981fc214b005f42d2ff4233499391653df7aefcbc13fc51568
            """))
    }

    @Test("keyed BLAKE2b-256 with a 32-byte key 00...1f of the empty string")
    func keyed256() {
        let key = SecureBytes(count: 32) { $0.copyBytes(from: (0..<32).map { UInt8($0) }) }
        #expect(BLAKE2b.mac(key: key, []) == Data(hex: "4e51e7a913fc80137da52880fecca175bf81e117d5c68126dc2774033517ea0d"))
    }

    @Test("a keyed hash differs from the unkeyed one and from another key's")
    func keysMatter() {
        let message: [BLAKE2b.Part] = [.data(Data("message".utf8))]
        let one = BLAKE2b.mac(key: SecureBytes.random(count: 32), message)
        let two = BLAKE2b.mac(key: SecureBytes.random(count: 32), message)
        #expect(one != BLAKE2b.hash(message))
        #expect(one != two)
    }

    @Test("parts are concatenated: data, secret and label parts of the same bytes hash alike")
    func parts() {
        let key = SecureBytes.random(count: 32)
        let whole = BLAKE2b.mac(key: key, [.data(Data("label\u{0}secret".utf8))])
        let pieces = BLAKE2b.mac(key: key, [.label("label"), .data(Data([0])), .secret(SecureBytes(copyingUTF8: "secret"))])
        #expect(whole == pieces)
        // Concatenation has no separators: the boundaries are the caller's business (labels end with 0x00).
        #expect(BLAKE2b.hash([.label("ab"), .label("c")]) == BLAKE2b.hash([.label("a"), .label("bc")]))
    }

    @Test("deriveKey gives in secure memory the same bytes mac gives in public", arguments: [16, 32, 64])
    func deriveKeyMatchesMac(_ count: Int) {
        let key = SecureBytes.random(count: 32)
        let derived = BLAKE2b.deriveKey(byteCount: count, key: key, [.label("x")])
        let mac = BLAKE2b.mac(byteCount: count, key: key, [.label("x")])
        #expect(derived.count == count)
        #expect(derived.constantTimeEquals(SecureBytes(count: count) { $0.copyBytes(from: mac) }))
    }

    @Test("the output size changes the whole output, not only its length")
    func outputSizeIsAParameter() {
        let short = BLAKE2b.hash(byteCount: 32, [.label("abc")])
        let long = BLAKE2b.hash(byteCount: 64, [.label("abc")])
        #expect(long.prefix(32) != short)
    }
}
