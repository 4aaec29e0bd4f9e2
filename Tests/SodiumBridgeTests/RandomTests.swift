import Foundation
import Testing
@testable import SodiumBridge

/// Public randomness, constant-time comparison of public data, and the library itself.
@Suite("Random, ConstantTime and Sodium")
struct RandomTests {
    @Test("Random.bytes gives the asked count, and fresh bytes each time", arguments: [0, 1, 24, 1000])
    func bytes(_ count: Int) {
        let one = Random.bytes(count: count), two = Random.bytes(count: count)
        #expect(one.count == count)
        if count >= 16 { #expect(one != two) }
    }

    @Test("Random.uniform stays below its bound and reaches every value")
    func uniform() {
        var seen = Set<UInt32>()
        for _ in 0..<2000 {
            let value = Random.uniform(below: 10)
            #expect(value < 10)
            seen.insert(value)
        }
        #expect(seen.count == 10)
        #expect(Random.uniform(below: 1) == 0)
    }

    @Test("ConstantTime.equals compares content and length")
    func constantTime() {
        #expect(ConstantTime.equals(Data(), Data()))
        #expect(ConstantTime.equals(Data([1, 2, 3]), Data([1, 2, 3])))
        #expect(!ConstantTime.equals(Data([1, 2, 3]), Data([1, 2, 4])))
        #expect(!ConstantTime.equals(Data([1, 2, 3]), Data([1, 2])))
        #expect(!ConstantTime.equals(Data(), Data([0])))
        // Slices with non-zero start indices compare by content.
        let bytes = Data([9, 1, 2, 3])
        #expect(ConstantTime.equals(bytes.dropFirst(), Data([1, 2, 3])))
    }

    @Test("libsodium initialises and reports a 1.0.x version")
    func version() {
        Sodium.ensureInitialized()
        #expect(Sodium.versionString.hasPrefix("1.0."))
    }
}
