import Foundation
import Testing
@testable import SodiumBridge

@Suite("XChaCha20-Poly1305")
struct XChaCha20Poly1305Tests {
    let key = SecureBytes.random(count: 32)
    let nonce = XChaCha20Poly1305.randomNonce()
    let ad = Data("associated".utf8)

    @Test("draft-irtf-cfrg-xchacha A.3.1 known answer")
    func knownAnswer() throws {
        let key = SecureBytes(count: 32) { $0.copyBytes(from: Data(hex: "808182838485868788898a8b8c8d8e8f909192939495969798999a9b9c9d9e9f")) }
        let nonce = Data(hex: "404142434445464748494a4b4c4d4e4f5051525354555657")
        let ad = Data(hex: "50515253c0c1c2c3c4c5c6c7")
        let plaintext = Data("Ladies and Gentlemen of the class of '99: If I could offer you only one tip for the future, sunscreen would be it.".utf8)
        let sealed = try XChaCha20Poly1305.seal(plaintext, using: key, nonce: nonce, authenticating: ad)
        #expect(sealed.suffix(16) == Data(hex: "c0875924c1c7987947deafd8780acf49"))
        #expect(sealed.prefix(16) == Data(hex: "bd6d179d3e83d43b9576579493c0e939"))
        #expect(try XChaCha20Poly1305.open(sealed, using: key, nonce: nonce, authenticating: ad) == plaintext)
    }

    @Test("round trip of public and secret plaintext")
    func roundTrip() throws {
        let message = Data((0..<1000).map { UInt8(truncatingIfNeeded: $0) })
        let sealed = try XChaCha20Poly1305.seal(message, using: key, nonce: nonce, authenticating: ad)
        #expect(sealed.count == message.count + 16)
        #expect(try XChaCha20Poly1305.open(sealed, using: key, nonce: nonce, authenticating: ad) == message)
        let secret = SecureBytes.random(count: 32)
        let wrapped = try XChaCha20Poly1305.seal(secret, using: key, nonce: nonce, authenticating: ad)
        #expect(try XChaCha20Poly1305.openSecret(wrapped, using: key, nonce: nonce, authenticating: ad).constantTimeEquals(secret))
    }

    @Test("any flipped bit in ciphertext, tag, nonce or associated data fails authentication", arguments: [0, 7, 15, 16, 31])
    func tampering(bit: Int) throws {
        let sealed = try XChaCha20Poly1305.seal(Data(repeating: 7, count: 16), using: key, nonce: nonce, authenticating: ad)
        var flipped = sealed
        flipped[bit] ^= 1
        #expect(throws: SodiumError.authenticationFailed) { try XChaCha20Poly1305.open(flipped, using: key, nonce: nonce, authenticating: ad) }
        var otherNonce = nonce
        otherNonce[bit % 24] ^= 0x80
        #expect(throws: SodiumError.authenticationFailed) { try XChaCha20Poly1305.open(sealed, using: key, nonce: otherNonce, authenticating: ad) }
        var otherAD = ad
        otherAD[bit % ad.count] ^= 1
        #expect(throws: SodiumError.authenticationFailed) { try XChaCha20Poly1305.open(sealed, using: key, nonce: nonce, authenticating: otherAD) }
    }

    @Test("wrong sizes are size errors, a box shorter than a tag an authentication failure")
    func sizes() throws {
        #expect(throws: SodiumError.invalidLength(what: "XChaCha20-Poly1305 key", expected: 32, actual: 16)) {
            try XChaCha20Poly1305.seal(Data(), using: SecureBytes(count: 16), nonce: nonce, authenticating: ad)
        }
        #expect(throws: SodiumError.invalidLength(what: "XChaCha20-Poly1305 nonce", expected: 24, actual: 12)) {
            try XChaCha20Poly1305.seal(Data(), using: key, nonce: Data(count: 12), authenticating: ad)
        }
        #expect(throws: SodiumError.authenticationFailed) {
            try XChaCha20Poly1305.open(Data(count: 15), using: key, nonce: nonce, authenticating: ad)
        }
    }

    @Test("chunk records: sealed in place, opened into public or secure memory, fresh nonce each time")
    func chunkRecords() throws {
        let plaintext = Data((0..<5000).map { UInt8(truncatingIfNeeded: $0 &* 13) })
        var records = Data(count: 2 * (5000 + ChunkRecords.overhead))
        ChunkRecords.seal(plaintext, range: 0..<5000, into: &records, at: 0, key: key, associatedData: ad)
        ChunkRecords.seal(plaintext, range: 0..<5000, into: &records, at: 5040, key: key, associatedData: ad)
        #expect(records[0..<24] != records[5040..<5064], "a nonce was reused")
        var out = Data(count: 5000)
        try ChunkRecords.open(records, range: 5040..<10080, into: &out, at: 0, key: key, associatedData: ad)
        #expect(out == plaintext)
        let secure = SecureBytes(count: 5000)
        try ChunkRecords.open(records, range: 0..<5040, into: secure, at: 0, key: key, associatedData: ad)
        #expect(secure.copyBytes(in: 0..<5000) == plaintext)
        records[100] ^= 1
        #expect(throws: SodiumError.authenticationFailed) {
            try ChunkRecords.open(records, range: 0..<5040, into: &out, at: 0, key: key, associatedData: ad)
        }
    }

    @Test("chunk records sealed from one batch of nonces: each its own nonce, across batches too, and each opens")
    func chunkNonceBatches() throws {
        let plaintext = Data((0..<300).map { UInt8(truncatingIfNeeded: $0 &* 7) })
        let stride = plaintext.count + ChunkRecords.overhead
        var records = Data(count: 7 * stride)
        var nonces = ChunkNonces(count: 3)  // seven records: three batches drawn
        for index in 0..<7 {
            ChunkRecords.seal(plaintext, range: 0..<plaintext.count, into: &records, at: index * stride, key: key,
                              associatedData: ad, nonces: &nonces)
        }
        let used = (0..<7).map { records.subdata(in: $0 * stride..<$0 * stride + XChaCha20Poly1305.nonceByteCount) }
        #expect(Set(used).count == 7, "a nonce was handed out twice")
        #expect(!used.contains(Data(count: XChaCha20Poly1305.nonceByteCount)), "a nonce left unwritten")
        for index in 0..<7 {
            var out = Data(count: plaintext.count)
            try ChunkRecords.open(records, range: index * stride..<(index + 1) * stride, into: &out, at: 0, key: key,
                                  associatedData: ad)
            #expect(out == plaintext)
        }
    }
}

extension Data {
    init(hex: String) {
        var bytes: [UInt8] = []
        var index = hex.startIndex
        while index < hex.endIndex {
            let next = hex.index(index, offsetBy: 2)
            bytes.append(UInt8(hex[index..<next], radix: 16)!)
            index = next
        }
        self.init(bytes)
    }
}
