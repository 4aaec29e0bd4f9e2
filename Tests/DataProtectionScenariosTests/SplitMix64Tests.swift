import DataProtectionScenarios
import Foundation
import Testing

@Suite("SplitMix64")
struct SplitMix64Tests {
    /// The first outputs for seed 0, computed by hand from the spec's formula
    /// (and matching the reference implementation's published values).
    @Test("the first outputs for seed 0")
    func seedZero() {
        var generator = SplitMix64(seed: 0)
        #expect(generator.next() == 0xE220_A839_7B1D_CDAF)
        #expect(generator.next() == 0x6E78_9E6A_A1B9_65F4)
        #expect(generator.next() == 0x06C4_5D18_8009_454F)
        #expect(generator.next() == 0xF88B_B8A8_724C_81EC)
    }

    @Test("the state wraps around without trapping")
    func wrapping() {
        var generator = SplitMix64(seed: .max)
        _ = generator.next()
        #expect(generator.state == UInt64.max &+ 0x9E37_79B9_7F4A_7C15)
    }

    @Test("random:<size>:<seed> is the outputs' little-endian bytes, cut to size")
    func bytes() {
        #expect(SplitMix64.bytes(count: 10, seed: 0) == [0xAF, 0xCD, 0x1D, 0x7B, 0x39, 0xA8, 0x20, 0xE2, 0xF4, 0x65])
        #expect(SplitMix64.bytes(count: 0, seed: 7).isEmpty)
        #expect(SplitMix64.bytes(count: 1000, seed: 42).prefix(17) == SplitMix64.bytes(count: 17, seed: 42)[...])
    }
}
