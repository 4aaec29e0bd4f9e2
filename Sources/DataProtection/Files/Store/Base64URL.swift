import Foundation

/// Unpadded base64url (RFC 4648 §5): file-system-safe names.
///
/// Table-driven: every file name the store writes or looks up is encoded, and
/// Foundation's `base64EncodedString()` followed by three `replacingOccurrences`
/// cost more than the name's encryption.
package enum Base64URL {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)
    /// The 6-bit value of each ASCII byte, or 0xFF for a byte outside the alphabet.
    private static let values: [UInt8] = {
        var table = [UInt8](repeating: 0xFF, count: 256)
        for (value, byte) in alphabet.enumerated() { table[Int(byte)] = UInt8(value) }
        return table
    }()

    package static func encode(_ data: Data) -> String {
        var output: [UInt8] = []
        output.reserveCapacity((data.count * 4 + 2) / 3)
        data.withUnsafeBytes { (bytes: UnsafeRawBufferPointer) in
            var index = 0
            while index + 3 <= bytes.count {
                let group = UInt32(bytes[index]) << 16 | UInt32(bytes[index + 1]) << 8 | UInt32(bytes[index + 2])
                output.append(alphabet[Int(group >> 18)])
                output.append(alphabet[Int(group >> 12 & 0x3F)])
                output.append(alphabet[Int(group >> 6 & 0x3F)])
                output.append(alphabet[Int(group & 0x3F)])
                index += 3
            }
            switch bytes.count - index {
            case 1:
                let group = UInt32(bytes[index]) << 16
                output.append(alphabet[Int(group >> 18)])
                output.append(alphabet[Int(group >> 12 & 0x3F)])
            case 2:
                let group = UInt32(bytes[index]) << 16 | UInt32(bytes[index + 1]) << 8
                output.append(alphabet[Int(group >> 18)])
                output.append(alphabet[Int(group >> 12 & 0x3F)])
                output.append(alphabet[Int(group >> 6 & 0x3F)])
            default:
                break
            }
        }
        return String(decoding: output, as: UTF8.self)
    }

    /// The bytes, or `nil` unless `string` is the canonical unpadded base64url of some bytes
    /// (otherwise two on-disk names could decode to one entry).
    package static func decode(_ string: String) -> Data? {
        let characters = Array(string.utf8)
        guard characters.count % 4 != 1 else { return nil }
        var output = Data(capacity: characters.count * 3 / 4)
        var group: UInt32 = 0
        var count = 0
        for character in characters {
            let value = values[Int(character)]
            guard value != 0xFF else { return nil }
            group = group << 6 | UInt32(value)
            count += 1
            if count == 4 {
                output.append(UInt8(group >> 16))
                output.append(UInt8(group >> 8 & 0xFF))
                output.append(UInt8(group & 0xFF))
                group = 0
                count = 0
            }
        }
        switch count {
        case 2:
            guard group & 0xF == 0 else { return nil }  // bits past the last byte must be zero
            output.append(UInt8(group >> 4))
        case 3:
            guard group & 0x3 == 0 else { return nil }
            output.append(UInt8(group >> 10))
            output.append(UInt8(group >> 2 & 0xFF))
        default:
            break
        }
        return output
    }
}
