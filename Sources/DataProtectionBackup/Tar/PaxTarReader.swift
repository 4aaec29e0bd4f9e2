import DataProtection
import Foundation

/// One entry of a backup's tar stream.
public struct BackupEntry: Sendable, Hashable, Codable {
    /// What an entry is.
    public enum Kind: String, Sendable, Hashable, Codable {
        /// A directory of the store.
        case directory
        /// A file of the store (databases are files too).
        case file
        /// The store's keychain items (`.dataprotection/items`, `Keys/backup-format.md`).
        case items
    }

    /// The store path, relative to the root, without a trailing `/`.
    public var path: String
    /// Directory, file or items.
    public var kind: Kind
    /// The content's size in bytes (0 for a directory).
    public var size: UInt64
    /// The entry's protection class (`nil` only in archives not made by dpctl).
    public var protectionClass: ProtectionClass?
}

/// Reads a pax tar stream, refusing what a backup never holds: links, devices, FIFOs, GNU
/// extensions, paths that would escape the store (absolute, `..`) and absurd sizes.
final class PaxTarReader {
    private let read: (Int) throws(DataProtectionError) -> Data
    /// Up to n bytes as they come (less than n is not the end); empty only at the end.
    private let readAvailable: (Int) throws(DataProtectionError) -> Data
    private var remaining: UInt64 = 0
    private var padding = 0
    private var finished = false
    /// The records of the global pax headers seen so far.
    private(set) var globalRecords: [String: String] = [:]

    /// Exact reads from `read`; file content from `readAvailable` when given (pieces as they
    /// come, e.g. one age chunk each, without gathering them).
    init(_ read: @escaping (Int) throws(DataProtectionError) -> Data,
         readAvailable: ((Int) throws(DataProtectionError) -> Data)? = nil) {
        self.read = read
        self.readAvailable = readAvailable ?? read
    }

    /// Reads the tar stream of an archive's plaintext (restore and verify): exact reads
    /// for headers, file content a chunk at a time; `progress` gets the plaintext bytes
    /// consumed after each read.
    convenience init(_ plaintext: AgePlaintextReader, progress: @escaping (UInt64) -> Void) {
        self.init({ (count: Int) throws(DataProtectionError) -> Data in
            let data = try plaintext.read(count)
            progress(plaintext.consumed)
            return data
        }, readAvailable: { (count: Int) throws(DataProtectionError) -> Data in
            let data = try plaintext.readAvailable(upTo: count)
            progress(plaintext.consumed)
            return data
        })
    }

    private func exactly(_ count: Int) throws(DataProtectionError) -> Data {
        let data = try read(count)
        guard data.count == count else { throw TarFormat.foreign("it ends inside an entry") }
        return data
    }

    /// The next entry, skipping any unread content of the previous one; `nil` after the end
    /// marker (two zero blocks, then only zeros to the end of the payload).
    func next() throws(DataProtectionError) -> BackupEntry? {
        guard !finished else { return nil }
        while remaining > 0 { _ = try content(upTo: 1 << 16) }
        if padding > 0 { _ = try exactly(padding); padding = 0 }
        var pax: [String: String] = [:]
        while true {
            let block = try exactly(TarFormat.blockSize)
            if block.allSatisfy({ $0 == 0 }) {
                guard try exactly(TarFormat.blockSize).allSatisfy({ $0 == 0 }), pax.isEmpty else {
                    throw TarFormat.foreign("a zero block stands alone")
                }
                while true {
                    let rest = try read(1 << 16)
                    if rest.isEmpty { break }
                    guard rest.allSatisfy({ $0 == 0 }) else { throw TarFormat.foreign("data follows the end of the archive") }
                }
                finished = true
                return nil
            }
            let header = try Self.parse(block)
            switch header.type {
            case TarFormat.EntryType.paxExtended.rawValue, TarFormat.EntryType.paxGlobal.rawValue:
                guard header.size <= UInt64(TarFormat.paxHeaderLimit) else { throw TarFormat.foreign("a pax header of \(header.size) bytes") }
                let records = try exactly(Int(header.size))
                _ = try exactly(TarFormat.padding(after: header.size).count)
                let parsed = try Self.parseRecords(records)
                if header.type == TarFormat.EntryType.paxExtended.rawValue {
                    pax.merge(parsed) { $1 }
                } else {
                    globalRecords.merge(parsed) { $1 }
                }
            case TarFormat.EntryType.file.rawValue, 0, TarFormat.EntryType.directory.rawValue:
                let isDirectory = header.type == TarFormat.EntryType.directory.rawValue
                var size = header.size
                if let text = pax["size"] {
                    guard let value = UInt64(text), String(value) == text else { throw TarFormat.foreign("a pax size is not a number") }
                    size = value
                }
                guard size <= TarFormat.fileSizeLimit else { throw TarFormat.foreign("an entry of \(size) bytes (more than 1 TiB)") }
                guard !isDirectory || size == 0 else { throw TarFormat.foreign("a directory with content") }
                let path = try Self.normalize(pax["path"] ?? header.name)
                var protectionClass: ProtectionClass?
                if let name = pax[TarFormat.classKey] {
                    guard let value = ProtectionClass(rawValue: name) else { throw TarFormat.foreign("unknown protection class \(name)") }
                    protectionClass = value
                }
                var kind: BackupEntry.Kind = isDirectory ? .directory : .file
                if let value = pax[TarFormat.kindKey] {
                    guard value == BackupEntry.Kind.items.rawValue, !isDirectory else { throw TarFormat.foreign("unknown entry kind \(value)") }
                    kind = .items
                }
                remaining = size
                padding = TarFormat.padding(after: size).count
                return BackupEntry(path: path, kind: kind, size: size, protectionClass: protectionClass)
            default:
                let flag = Character(UnicodeScalar(header.type))
                let what = switch flag {
                case "1": "a hard link"
                case "2": "a symbolic link"
                case "3", "4": "a device"
                case "6": "a FIFO"
                case "L", "K": "a GNU long-name entry (write pax, not GNU, tar)"
                default: "an entry of type \(flag)"
                }
                throw TarFormat.foreign("\(what) (\(header.name.prefix(100)))")
            }
        }
    }

    /// Up to `count` bytes of the current file's content; empty when it is all read.
    func content(upTo count: Int) throws(DataProtectionError) -> Data {
        guard remaining > 0 else { return Data() }
        let piece = try readAvailable(Int(min(UInt64(count), remaining)))
        guard !piece.isEmpty else { throw TarFormat.foreign("it ends inside an entry") }
        remaining -= UInt64(piece.count)
        return piece
    }

    // MARK: - Parsing

    private struct Header {
        let name: String
        let type: UInt8
        let size: UInt64
    }

    private static func field(_ block: Data, _ offset: Int, _ length: Int) -> Data {
        let slice = block[(block.startIndex + offset)..<(block.startIndex + offset + length)]
        return Data(slice.prefix { $0 != 0 })
    }

    private static func octal(_ data: Data) throws(DataProtectionError) -> UInt64 {
        let digits = data.filter { $0 != 0x20 }
        guard !digits.isEmpty, digits.count <= 12, digits.allSatisfy({ (0x30...0x37).contains($0) }) else {
            throw TarFormat.foreign("a numeric field is not octal")
        }
        return digits.reduce(0) { $0 << 3 | UInt64($1 - 0x30) }
    }

    private static func parse(_ block: Data) throws(DataProtectionError) -> Header {
        guard field(block, 257, 6) == Data("ustar".utf8), block[block.startIndex + 263] == 0x30, block[block.startIndex + 264] == 0x30 else {
            throw TarFormat.foreign("a header is not POSIX ustar")
        }
        var sum = 0
        for (index, byte) in block.enumerated() { sum += (148..<156).contains(index) ? 0x20 : Int(byte) }
        guard try octal(field(block, 148, 8)) == UInt64(sum) else { throw TarFormat.foreign("a header's checksum is wrong") }
        let name = field(block, 0, 100), prefix = field(block, 345, 155)
        let full = prefix.isEmpty ? name : prefix + Data("/".utf8) + name
        guard let text = String(data: full, encoding: .utf8) else { throw TarFormat.foreign("a name is not UTF-8") }
        return Header(name: text, type: block[block.startIndex + 156], size: try octal(field(block, 124, 12)))
    }

    private static func parseRecords(_ data: Data) throws(DataProtectionError) -> [String: String] {
        var records: [String: String] = [:]
        var rest = data[...]
        while !rest.isEmpty {
            guard let space = rest.firstIndex(of: 0x20), let length = Int(String(decoding: rest[..<space], as: UTF8.self)),
                  length > space - rest.startIndex + 1, length <= rest.count,
                  rest[rest.startIndex + length - 1] == 0x0A
            else { throw TarFormat.foreign("a pax record is malformed") }
            let record = rest[(space + 1)..<(rest.startIndex + length - 1)]
            guard let equals = record.firstIndex(of: UInt8(ascii: "=")),
                  let key = String(data: Data(record[..<equals]), encoding: .utf8),
                  let value = String(data: Data(record[(equals + 1)...]), encoding: .utf8)
            else { throw TarFormat.foreign("a pax record is not key=value in UTF-8") }
            records[key] = value
            rest = rest.dropFirst(length)
        }
        return records
    }

    /// A store path from an archive name: relative, no `..`, no NUL, no empty result; `.`
    /// components and a trailing `/` dropped.
    static func normalize(_ name: String) throws(DataProtectionError) -> String {
        guard !name.hasPrefix("/") else { throw TarFormat.foreign("an absolute path (\(name.prefix(100)))") }
        guard !name.utf8.contains(0), name.utf8.count <= TarFormat.pathLimit else { throw TarFormat.foreign("a path too long or with NUL") }
        let components = name.split(separator: "/").filter { $0 != "." }
        guard !components.isEmpty else { throw TarFormat.foreign("an empty path") }
        for component in components {
            guard component != ".." else { throw TarFormat.foreign("a path that climbs out with .. (\(name.prefix(100)))") }
            guard component.utf8.count <= TarFormat.componentLimit else { throw TarFormat.foreign("a name longer than 255 bytes") }
        }
        return components.joined(separator: "/")
    }
}
