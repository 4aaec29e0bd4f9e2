import DataProtection
import Foundation

/// A value that did not parse: what was expected, and where in the word it went wrong.
struct ValueError: Error {
    /// What the word should have been, e.g. "a duration such as 10s".
    var expected: String
    /// 0-based offset in Unicode scalars from the start of the word.
    var offset: Int = 0
}

/// `data` values: `"text"`, `hex:…`, `random:<size>:<seed>`, `empty`.
public enum DataValue {
    static let expected = #"data ("text", hex:<digits>, random:<size>:<seed> or empty)"#

    /// Parses a bare data word (`hex:`, `random:` or `empty`; strings are read by the lexer).
    static func parse(word: String) throws(ValueError) -> Data {
        if word == "empty" { return Data() }
        if word.hasPrefix("hex:") {
            let digits = Array(word.unicodeScalars.dropFirst(4))
            var bytes = Data(capacity: digits.count / 2)
            var high: UInt8?
            for (index, digit) in digits.enumerated() {
                guard let nibble = hexValue(digit) else { throw ValueError(expected: "a hex digit", offset: 4 + index) }
                if let first = high {
                    bytes.append(first << 4 | nibble)
                    high = nil
                } else {
                    high = nibble
                }
            }
            guard high == nil else { throw ValueError(expected: "an even number of hex digits", offset: 4 + digits.count) }
            return bytes
        }
        if word.hasPrefix("random:") {
            let parts = word.dropFirst(7).split(separator: ":", omittingEmptySubsequences: false)
            guard parts.count == 2 else { throw ValueError(expected: "random:<size>:<seed>", offset: 0) }
            let size = try SizeValue.parse(String(parts[0]), offset: 7)
            guard let seed = UInt64(parts[1]), parts[1].allSatisfy(\.isASCII) else {
                throw ValueError(expected: "a decimal seed (0 to 18446744073709551615)", offset: 8 + parts[0].unicodeScalars.count)
            }
            guard size <= SizeValue.largestData else {
                throw ValueError(expected: "a random size of at most 1 GiB", offset: 7)
            }
            return Data(SplitMix64.bytes(count: Int(size), seed: seed))
        }
        throw ValueError(expected: expected)
    }

    static func hexValue(_ digit: Unicode.Scalar) -> UInt8? {
        switch digit.value {
        case 0x30...0x39: UInt8(digit.value - 0x30)
        case 0x41...0x46: UInt8(digit.value - 0x41 + 10)
        case 0x61...0x66: UInt8(digit.value - 0x61 + 10)
        default: nil
        }
    }

    /// `data` as it would be written in a scenario: `empty`, a string when it is
    /// short text, else `hex:…` (long data is summarised).
    public static func format(_ data: Data) -> String {
        if data.isEmpty { return "empty" }
        if data.count <= 96, let text = String(data: data, encoding: .utf8),
           !text.unicodeScalars.contains(where: { ($0.value < 0x20 && !"\n\t\r".unicodeScalars.contains($0)) || $0.value == 0x7F }) {
            return quote(data)
        }
        if data.count <= 48 { return "hex:" + hex(data) }
        return "\(data.count) bytes (hex:\(hex(data.prefix(16)))…)"
    }

    /// A string literal for `bytes`, with the language's escapes.
    static func quote(_ bytes: Data) -> String {
        var result = "\""
        if let text = String(data: bytes, encoding: .utf8) {
            for scalar in text.unicodeScalars { result += escape(scalar) }
        } else {
            for byte in bytes {
                result += byte < 0x80 ? escape(Unicode.Scalar(byte)) : String(format: "\\x%02X", byte)
            }
        }
        return result + "\""
    }

    private static func escape(_ scalar: Unicode.Scalar) -> String {
        switch scalar {
        case "\n": return "\\n"
        case "\t": return "\\t"
        case "\r": return "\\r"
        case "\\": return "\\\\"
        case "\"": return "\\\""
        default:
            if scalar.value < 0x20 || scalar.value == 0x7F { return String(format: "\\x%02X", scalar.value) }
            return String(scalar)
        }
    }

    static func hex(_ data: Data) -> String {
        data.map { String(format: "%02x", $0) }.joined()
    }
}

/// `size` values: an integer with an optional unit `B`, `KiB`, `MiB`, `GiB`.
enum SizeValue {
    static let expected = "a size such as 4096 or 64KiB"
    /// The largest data a scenario may make (`random:`), to keep a typo from exhausting memory.
    static let largestData: UInt64 = 1 << 30

    static func parse(_ word: String, offset: Int = 0) throws(ValueError) -> UInt64 {
        let digits = word.prefix { $0.isASCII && $0.isNumber }
        let unit = word.dropFirst(digits.count)
        let multiplier: UInt64
        switch unit {
        case "", "B": multiplier = 1
        case "KiB": multiplier = 1 << 10
        case "MiB": multiplier = 1 << 20
        case "GiB": multiplier = 1 << 30
        default:
            throw ValueError(expected: digits.isEmpty ? expected : "a size unit (B, KiB, MiB or GiB)", offset: offset + digits.count)
        }
        guard !digits.isEmpty else { throw ValueError(expected: expected, offset: offset) }
        guard let value = UInt64(digits) else { throw ValueError(expected: "a size below 2^64", offset: offset) }
        let (product, overflow) = value.multipliedReportingOverflow(by: multiplier)
        guard !overflow else { throw ValueError(expected: "a size below 2^64", offset: offset) }
        return product
    }
}

/// `duration` values: an integer with a unit `ms`, `s`, `m`, `h` or `d`.
enum DurationValue {
    static let expected = "a duration such as 10s (units ms, s, m, h, d)"

    static func parse(_ word: String) throws(ValueError) -> Duration {
        let digits = word.prefix { $0.isASCII && $0.isNumber }
        let unit = word.dropFirst(digits.count)
        guard !digits.isEmpty else { throw ValueError(expected: expected) }
        let milliseconds: Int64
        switch unit {
        case "ms": milliseconds = 1
        case "s": milliseconds = 1000
        case "m": milliseconds = 60_000
        case "h": milliseconds = 3_600_000
        case "d": milliseconds = 86_400_000
        default: throw ValueError(expected: "a duration unit (ms, s, m, h or d)", offset: digits.count)
        }
        // At most about 290 years in nanoseconds: the device clock counts Int64 nanoseconds.
        guard let value = Int64(digits) else { throw ValueError(expected: "a shorter duration") }
        let (total, overflow) = value.multipliedReportingOverflow(by: milliseconds)
        guard !overflow, total <= Int64.max / 1_000_000 else { throw ValueError(expected: "a shorter duration") }
        return .milliseconds(total)
    }

    /// The shortest exact spelling: `10s`, `1500ms`, `48h`.
    static func format(_ duration: Duration) -> String {
        let milliseconds = duration.components.seconds * 1000 + duration.components.attoseconds / 1_000_000_000_000_000
        for (unit, size) in [("d", Int64(86_400_000)), ("h", 3_600_000), ("m", 60_000), ("s", 1000)]
        where milliseconds != 0 && milliseconds % size == 0 {
            return "\(milliseconds / size)\(unit)"
        }
        return "\(milliseconds)ms"
    }
}

/// Class names: Foundation's `FileProtectionType` names.
enum ClassValue {
    static let expected = "a class (complete, completeUnlessOpen, completeUntilFirstUserAuthentication, completeWhenUserInactive or none)"

    static func parse(_ word: String) throws(ValueError) -> ProtectionClass {
        guard let protectionClass = ProtectionClass(rawValue: word) else { throw ValueError(expected: expected) }
        return protectionClass
    }
}

extension Duration {
    /// A duration spelled as in the scenario language: an integer with a unit
    /// `ms`, `s`, `m`, `h` or `d` (`500ms`, `30s`, `48h`); `nil` for anything else.
    /// Command-line tools use the same spelling for their durations.
    public init?(scenarioSpelling text: String) {
        guard let duration = try? DurationValue.parse(text) else { return nil }
        self = duration
    }

    /// The shortest exact scenario-language spelling: `10s`, `1500ms`, `48h`.
    public var scenarioSpelling: String { DurationValue.format(self) }
}
