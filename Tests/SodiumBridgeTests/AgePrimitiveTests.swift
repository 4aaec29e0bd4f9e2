import Foundation
import Testing
@testable import SodiumBridge

/// The primitives of the age format over libsodium, against their RFCs' known answers.
@Suite("age primitives: HMAC-SHA-256, HKDF-SHA-256, scrypt, ChaCha20-Poly1305")
struct AgePrimitiveTests {
    private func hex(_ text: String) -> Data {
        var data = Data()
        var index = text.startIndex
        while index < text.endIndex {
            let next = text.index(index, offsetBy: 2)
            data.append(UInt8(text[index..<next], radix: 16)!)
            index = next
        }
        return data
    }

    private func secure(_ data: Data) -> SecureBytes { SecureBytes(count: data.count) { $0.copyBytes(from: data) } }
    private func bytes(_ secure: SecureBytes) -> Data { secure.withUnsafeBytes { Data($0) } }

    @Test("HMAC-SHA-256: RFC 4231 test cases 2 and 6 (a key longer than a block)")
    func hmac() {
        #expect(HMACSHA256.tag(key: secure(Data("Jefe".utf8)), message: Data("what do ya want for nothing?".utf8))
            == hex("5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"))
        #expect(HMACSHA256.tag(key: secure(Data(repeating: 0xaa, count: 131)),
                               message: Data("Test Using Larger Than Block-Size Key - Hash Key First".utf8))
            == hex("60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"))
    }

    @Test("HKDF-SHA-256: RFC 5869 test cases 1 and 3 (no salt, no info)")
    func hkdf() {
        let first = HKDFSHA256.deriveKey(inputKey: secure(Data(repeating: 0x0b, count: 22)), salt: hex("000102030405060708090a0b0c"),
                                         info: hex("f0f1f2f3f4f5f6f7f8f9"), byteCount: 42)
        #expect(bytes(first) == hex("3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf34007208d5b887185865"))
        let third = HKDFSHA256.deriveKey(inputKey: secure(Data(repeating: 0x0b, count: 22)), salt: Data(), info: Data(), byteCount: 42)
        #expect(bytes(third) == hex("8da4e775a563c18f715f802a063c5a31b8a11f5c5ee1879ec3454e5f3c738d2d9d201395faa4b61a96c8"))
    }

    @Test("scrypt: RFC 7914 §12 (password / NaCl, N = 1024, r = 8, p = 16); log2(N) outside 1...30 refused")
    func scrypt() throws {
        let key = try Scrypt.deriveKey(password: secure(Data("password".utf8)), salt: Data("NaCl".utf8), logN: 10, r: 8, p: 16, byteCount: 64)
        #expect(bytes(key) == hex("fdbabe1c9d3472007856e7190d01e9fe7c6ad7cbc8237830e77376634b3731622eaf30d92e22a3886ff109279d9830dac727afb94a83ee6d8360cbdfa2cc0640"))
        #expect(throws: SodiumError.self) { try Scrypt.deriveKey(password: secure(Data("x".utf8)), salt: Data(), logN: 0) }
    }

    @Test("ChaCha20-Poly1305 IETF: round trip; every flipped byte, another nonce and a 24-byte nonce refused (known answers: the age interoperability tests)")
    func chacha() throws {
        let key = SecureBytes.random(count: 32)
        let nonce = Data((0..<12).map { UInt8($0) })
        let plaintext = Data("Ladies and Gentlemen of the class of '99".utf8)
        let sealed = try ChaCha20Poly1305.seal(plaintext, using: key, nonce: nonce)
        #expect(sealed.count == plaintext.count + 16)
        #expect(try ChaCha20Poly1305.open(sealed, using: key, nonce: nonce) == plaintext)
        for index in sealed.indices {
            var tampered = sealed
            tampered[index] ^= 0x01
            #expect(throws: SodiumError.authenticationFailed) { try ChaCha20Poly1305.open(tampered, using: key, nonce: nonce) }
        }
        var otherNonce = nonce
        otherNonce[11] = 1
        #expect(throws: SodiumError.authenticationFailed) { try ChaCha20Poly1305.open(sealed, using: key, nonce: otherNonce) }
        #expect(throws: SodiumError.self) { try ChaCha20Poly1305.seal(plaintext, using: key, nonce: Data(count: 24)) }
    }
}
