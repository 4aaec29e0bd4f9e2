/// SplitMix64 (Steele, Lea and Flood), exactly as the scenario language defines it
/// for `random:<size>:<seed>`: a reproducible byte stream, the same on every platform.
public struct SplitMix64: Sendable, Hashable {
    /// The generator's state.
    public var state: UInt64

    /// A generator started at `seed`.
    public init(seed: UInt64) { state = seed }

    /// The next output: `state += 0x9E3779B97F4A7C15; z = state;
    /// z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9; z = (z ^ (z >> 27)) * 0x94D049BB133111EB;
    /// z ^ (z >> 31)` (wrapping arithmetic).
    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// The first `count` bytes of the little-endian 8-byte outputs, concatenated.
    public static func bytes(count: Int, seed: UInt64) -> [UInt8] {
        var generator = SplitMix64(seed: seed)
        var bytes: [UInt8] = []
        bytes.reserveCapacity(count + 7)
        while bytes.count < count {
            let value = generator.next()
            for shift in stride(from: 0, to: 64, by: 8) { bytes.append(UInt8(truncatingIfNeeded: value >> UInt64(shift))) }
        }
        bytes.removeLast(bytes.count - count)
        return bytes
    }
}
