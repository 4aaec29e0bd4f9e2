import Foundation
import Testing
@testable import DataProtection

/// Everything a user can see in a store, in one comparable value: every path,
/// with its type, class and content (a digest), found by walking the store's
/// own listings. Two stores look the same to a user exactly when their snapshots are equal.
struct StoreSnapshot: Equatable, CustomStringConvertible {
    /// `/path` → `dir C`, or `file A 40000 <digest>`.
    var items: [String: String]

    /// Walks the whole store. Reading can fail (that is a finding: the caller reports it).
    static func take(_ store: ProtectedStore, excluding excluded: Set<String> = []) throws -> StoreSnapshot {
        var items: [String: String] = [:]
        func walk(_ directory: String) throws {
            for name in try store.contentsOfDirectory(atPath: directory) {
                let path = directory == "/" ? "/" + name : directory + "/" + name
                if excluded.contains(path) { continue }
                let attributes = try store.attributesOfItem(atPath: path)
                let letter = attributes.protectionClass?.letter ?? "-"
                if attributes.type == .directory {
                    items[path] = "dir \(letter)"
                    try walk(path)
                } else {
                    let data = try store.contents(atPath: path)
                    items[path] = "file \(letter) \(data.count) \(digest(data))"
                }
            }
        }
        try walk("/")
        return StoreSnapshot(items: items)
    }

    /// A short content digest (FNV-1a, 64 bits): enough to tell states apart in a test.
    static func digest(_ data: Data) -> String {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in data {
            hash ^= UInt64(byte)
            hash = hash &* 0x100_0000_01b3
        }
        return String(hash, radix: 16)
    }

    var description: String {
        items.keys.sorted().map { "\($0): \(items[$0]!)" }.joined(separator: ", ")
    }
}

/// Names on disk under `directory` that are debris of an interrupted operation
/// (temporary files and directories), at any depth.
func debris(under directory: URL) -> [String] {
    let everything = (try? FileManager.default.subpathsOfDirectory(atPath: directory.path)) ?? []
    return everything.filter { ($0 as NSString).lastPathComponent.hasPrefix(AtomicFileWriter.temporaryPrefix) }
}
