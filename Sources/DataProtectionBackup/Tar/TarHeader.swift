import DataProtection
import Foundation

/// The POSIX.1-2001 (pax) tar profile of a backup (`Keys/backup-format.md`, "The tar profile"):
/// 512-byte blocks, ustar headers, pax extended headers (`x`) before every entry.
enum TarFormat {
    static let blockSize = 512
    /// The pax key that carries an entry's protection class.
    static let classKey = "DATAPROTECTION.class"
    /// The pax key that marks a DataProtection-specific entry (`items`).
    static let kindKey = "DATAPROTECTION.kind"
    /// Global pax keys: the backup format's version, and the class of the store's root.
    static let formatKey = "DATAPROTECTION.format"
    static let rootClassKey = "DATAPROTECTION.rootClass"
    /// Largest size an octal ustar `size` field holds (11 digits); beyond it, pax `size`.
    static let ustarSizeLimit: UInt64 = 0o777_7777_7777
    /// The most a restore accepts for one file: 1 TiB (larger is an absurd size).
    static let fileSizeLimit: UInt64 = 1 << 40
    /// The most a pax extended header may hold.
    static let paxHeaderLimit = 64 * 1024
    /// The most bytes in a path, and in one of its components.
    static let pathLimit = 4096
    static let componentLimit = 255

    enum EntryType: UInt8 {
        case file = 0x30 // "0"
        case directory = 0x35 // "5"
        case paxExtended = 0x78 // "x"
        case paxGlobal = 0x67 // "g"
    }

    /// A ustar header block.
    static func header(name: String, type: EntryType, size: UInt64, mode: Int, modificationTime: Int64) -> Data {
        var block = Data(count: blockSize)
        func put(_ text: String, at offset: Int, length: Int) {
            let bytes = Array(text.utf8.prefix(length))
            block.replaceSubrange(offset..<(offset + bytes.count), with: bytes)
        }
        func octal(_ value: UInt64, at offset: Int, length: Int) {
            let text = String(value, radix: 8)
            put(String(repeating: "0", count: max(0, length - 1 - text.count)) + text, at: offset, length: length - 1)
        }
        put(name, at: 0, length: 100)
        octal(UInt64(mode), at: 100, length: 8)
        octal(0, at: 108, length: 8)
        octal(0, at: 116, length: 8)
        octal(min(size, ustarSizeLimit), at: 124, length: 12)
        octal(UInt64(max(0, min(modificationTime, 0o777_7777_7777))), at: 136, length: 12)
        put("        ", at: 148, length: 8)
        block[156] = type.rawValue
        put("ustar\0", at: 257, length: 6)
        put("00", at: 263, length: 2)
        let sum = block.reduce(0) { $0 + Int($1) }
        let text = String(sum, radix: 8)
        put(String(repeating: "0", count: 6 - text.count) + text + "\0 ", at: 148, length: 8)
        return block
    }

    /// pax records `"%d %s=%s\n"`, the length counting itself.
    static func paxRecords(_ records: [(String, String)]) -> Data {
        var data = Data()
        for (key, value) in records {
            let body = " \(key)=\(value)\n"
            var length = body.utf8.count + 1
            while String(length).utf8.count + body.utf8.count != length { length = String(length).utf8.count + body.utf8.count }
            data += Data((String(length) + body).utf8)
        }
        return data
    }

    /// Zero bytes that complete `size` to a whole block.
    static func padding(after size: UInt64) -> Data {
        Data(count: Int((UInt64(blockSize) - size % UInt64(blockSize)) % UInt64(blockSize)))
    }

    static func foreign(_ what: String) -> DataProtectionError {
        DataProtectionError(.integrityFailure, "The archive's tar stream is not a backup: \(what).",
                            hint: "Restore only archives made by `dpctl backup create` (or a pax tar following Keys/backup-format.md).")
    }
}
