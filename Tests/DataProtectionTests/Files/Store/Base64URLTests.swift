import Foundation
import Testing
@testable import DataProtection

/// On-disk names are unpadded base64url: the encoder must agree with RFC 4648
/// (checked against Foundation's base64), and the decoder must accept exactly
/// the canonical spellings.
@Suite struct Base64URLTests {
    /// Foundation's base64, turned into unpadded base64url.
    static func reference(_ data: Data) -> String {
        String(data.base64EncodedString().map { $0 == "+" ? "-" : $0 == "/" ? "_" : $0 }.filter { $0 != "=" })
    }

    @Test("encodes like RFC 4648 base64url without padding; decodes back", arguments: 0..<70)
    func roundTrip(count: Int) {
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<20 {
            let data = Data((0..<count).map { _ in UInt8.random(in: 0...255, using: &generator) })
            let encoded = Base64URL.encode(data)
            #expect(encoded == Self.reference(data))
            #expect(Base64URL.decode(encoded) == data)
        }
    }

    @Test("refuses what is not a canonical spelling")
    func refusesNonCanonical() {
        #expect(Base64URL.decode("QQ") == Data([0x41]))
        #expect(Base64URL.decode("QR") == nil)      // bits past the last byte set
        #expect(Base64URL.decode("QUE") == Data([0x41, 0x41]))
        #expect(Base64URL.decode("QUF") == nil)
        #expect(Base64URL.decode("QQ==") == nil)    // padding
        #expect(Base64URL.decode("Q") == nil)       // a length no bytes encode to
        #expect(Base64URL.decode("a+b/") == nil)    // the other alphabet
        #expect(Base64URL.decode("ab c") == nil)
        #expect(Base64URL.decode("abé") == nil)
        #expect(Base64URL.decode("") == Data())
    }
}
