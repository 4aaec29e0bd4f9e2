import Foundation

/// Bech32 (BIP 173) as age uses it for `age1…` recipients and `AGE-SECRET-KEY-1…` identities:
/// the original checksum constant (not Bech32m), no 90-character limit, one case throughout.
enum Bech32 {
    private static let alphabet = Array("qpzry9x8gf2tvdw0s3jn54khce6mua7l".utf8)
    private static let generator: [UInt32] = [0x3b6a_57b2, 0x2650_8e6d, 0x1ea1_19fa, 0x3d42_33dd, 0x2a14_62b3]

    /// `hrp` (lowercase), `1`, the 5-bit groups of `data` and the checksum; uppercase with `uppercase`.
    static func encode(hrp: String, data: some Collection<UInt8>, uppercase: Bool = false) -> String {
        let hrpBytes = Array(hrp.lowercased().utf8)
        let values = convertBits(Array(data), from: 8, to: 5, pad: true)!
        let checksum = self.checksum(hrp: hrpBytes, values: values)
        let text = String(decoding: hrpBytes + [UInt8(ascii: "1")] + (values + checksum).map { alphabet[Int($0)] }, as: UTF8.self)
        return uppercase ? text.uppercased() : text
    }

    /// The human-readable part (lowercase) and the data of `text`; `nil` unless it is valid
    /// Bech32 in one case with a correct checksum and zero padding.
    static func decode(_ text: String) -> (hrp: String, data: [UInt8])? {
        let bytes = Array(text.utf8)
        guard bytes.allSatisfy({ (33...126).contains($0) }) else { return nil }
        let lower = text.lowercased(), upper = text.uppercased()
        guard text == lower || text == upper else { return nil }
        let chars = Array(lower.utf8)
        guard let separator = chars.lastIndex(of: UInt8(ascii: "1")), separator >= 1, chars.count - separator - 1 >= 6 else { return nil }
        let hrp = Array(chars[..<separator])
        var values: [UInt8] = []
        for char in chars[(separator + 1)...] {
            guard let index = alphabet.firstIndex(of: char) else { return nil }
            values.append(UInt8(index))
        }
        guard polymod(expand(hrp) + values) == 1 else { return nil }
        guard let data = convertBits(Array(values.dropLast(6)), from: 5, to: 8, pad: false) else { return nil }
        return (String(decoding: hrp, as: UTF8.self), data)
    }

    private static func polymod(_ values: [UInt8]) -> UInt32 {
        var checksum: UInt32 = 1
        for value in values {
            let top = checksum >> 25
            checksum = (checksum & 0x1ff_ffff) << 5 ^ UInt32(value)
            for bit in 0..<5 where (top >> bit) & 1 == 1 { checksum ^= generator[bit] }
        }
        return checksum
    }

    private static func expand(_ hrp: [UInt8]) -> [UInt8] {
        hrp.map { $0 >> 5 } + [0] + hrp.map { $0 & 31 }
    }

    private static func checksum(hrp: [UInt8], values: [UInt8]) -> [UInt8] {
        let mod = polymod(expand(hrp) + values + [0, 0, 0, 0, 0, 0]) ^ 1
        return (0..<6).map { UInt8((mod >> (5 * (5 - $0))) & 31) }
    }

    /// Regroups bits; `nil` when `pad` is false and the leftover bits are not zero padding.
    private static func convertBits(_ data: [UInt8], from: Int, to: Int, pad: Bool) -> [UInt8]? {
        var accumulator = 0, bits = 0
        var result: [UInt8] = []
        let maxValue = (1 << to) - 1
        for value in data {
            guard Int(value) >> from == 0 else { return nil }
            accumulator = (accumulator << from) | Int(value)
            bits += from
            while bits >= to {
                bits -= to
                result.append(UInt8((accumulator >> bits) & maxValue))
            }
        }
        if pad {
            if bits > 0 { result.append(UInt8((accumulator << (to - bits)) & maxValue)) }
        } else if bits >= from || (accumulator << (to - bits)) & maxValue != 0 {
            return nil
        }
        return result
    }
}
