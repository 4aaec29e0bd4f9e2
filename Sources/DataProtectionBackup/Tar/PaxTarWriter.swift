import DataProtection
import Foundation

/// Writes a pax tar stream of directories and regular files, each entry preceded by a pax
/// extended header with its protection class (and `path`/`size` when ustar cannot hold them).
final class PaxTarWriter {
    private let sink: (Data) throws(DataProtectionError) -> Void

    init(_ sink: @escaping (Data) throws(DataProtectionError) -> Void) { self.sink = sink }

    private func headers(path: String, type: TarFormat.EntryType, size: UInt64, mode: Int, modificationTime: Int64,
                         extra: [(String, String)]) throws(DataProtectionError) {
        let name = type == .directory ? path + "/" : path
        var records = extra
        let fitsUstar = name.utf8.count <= 100 && name.utf8.allSatisfy { $0 < 0x80 }
        if !fitsUstar { records.insert(("path", name), at: 0) }
        if size > TarFormat.ustarSizeLimit { records.insert(("size", String(size)), at: 0) }
        if !records.isEmpty {
            let pax = TarFormat.paxRecords(records)
            let base = name.split(separator: "/").last.map(String.init) ?? "entry"
            let paxName = String(("PaxHeaders/" + base).utf8.prefix(99).filter { $0 < 0x80 }.map { Character(UnicodeScalar($0)) })
            try sink(TarFormat.header(name: paxName, type: .paxExtended, size: UInt64(pax.count), mode: 0o644, modificationTime: modificationTime))
            try sink(pax + TarFormat.padding(after: UInt64(pax.count)))
        }
        let ustarName = fitsUstar ? name : String(name.utf8.prefix(100).filter { $0 < 0x80 }.map { Character(UnicodeScalar($0)) })
        try sink(TarFormat.header(name: ustarName, type: type, size: size, mode: mode, modificationTime: modificationTime))
    }

    /// The archive's global pax header: the format version and the root's class.
    func globalHeader(rootClass: ProtectionClass?) throws(DataProtectionError) {
        var records = [(TarFormat.formatKey, "1")]
        if let rootClass { records.append((TarFormat.rootClassKey, rootClass.rawValue)) }
        let pax = TarFormat.paxRecords(records)
        try sink(TarFormat.header(name: "PaxHeaders/global", type: .paxGlobal, size: UInt64(pax.count), mode: 0o644, modificationTime: 0))
        try sink(pax + TarFormat.padding(after: UInt64(pax.count)))
    }

    /// A directory entry.
    func directory(_ path: String, protectionClass: ProtectionClass?, modificationTime: Int64) throws(DataProtectionError) {
        try headers(path: path, type: .directory, size: 0, mode: 0o700, modificationTime: modificationTime,
                    extra: protectionClass.map { [(TarFormat.classKey, $0.rawValue)] } ?? [])
    }

    /// A regular file of exactly `size` bytes, which `next` hands out in pieces (`nil` at the end).
    /// A content of another length than announced fails (`integrityFailure`): the archive would lie.
    func file(_ path: String, size: UInt64, protectionClass: ProtectionClass?, modificationTime: Int64, kind: String? = nil,
              content next: () throws(DataProtectionError) -> Data?) throws(DataProtectionError) {
        var extra: [(String, String)] = protectionClass.map { [(TarFormat.classKey, $0.rawValue)] } ?? []
        if let kind { extra.append((TarFormat.kindKey, kind)) }
        try headers(path: path, type: .file, size: size, mode: 0o600, modificationTime: modificationTime, extra: extra)
        var written: UInt64 = 0
        while let piece = try next() {
            written += UInt64(piece.count)
            guard written <= size else { break }
            try sink(piece)
        }
        guard written == size else {
            throw DataProtectionError(.integrityFailure, "\(path) changed size while it was archived (\(size) bytes announced, \(written) read).")
        }
        try sink(TarFormat.padding(after: size))
    }

    /// Bytes as they are (tests craft archives a backup never holds).
    func raw(_ data: Data) throws(DataProtectionError) {
        try sink(data)
    }

    /// The end of the archive: two zero blocks.
    func finish() throws(DataProtectionError) {
        try sink(Data(count: 2 * TarFormat.blockSize))
    }
}
