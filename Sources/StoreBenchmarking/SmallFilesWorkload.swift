import DataProtection
import Foundation
import SodiumBridge
import SystemPackage
#if canImport(Glibc)
import Glibc
#endif

/// Many small files written atomically: whole-file puts into the store, and the
/// plain atomic write (temporary file, write, `fsync`, `rename`), optionally
/// followed by an `fsync` of the directory as the store's put does.
package enum SmallFilesWorkload {
    /// Puts `count` files of `data` into `directory` of the store.
    package static func store(_ store: ProtectedStore, directory: String, count: Int, data: Data) throws -> Duration {
        try store.createDirectory(atPath: directory)
        return try measure {
            for index in 0..<count { try store.write(data, to: "\(directory)/file-\(index)") }
        }
    }

    /// Writes `count` files of `data` into `directory` (created), each atomically.
    package static func plain(directory: URL, count: Int, data: Data, synchronizeDirectory: Bool) throws -> Duration {
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let folder = FilePath(directory.path)
        return try measure {
            for index in 0..<count {
                let target = folder.appending("file-\(index)")
                let temporary = folder.appending(".tmp-file-\(index)")
                let file = try FileDescriptor.open(temporary, .writeOnly, options: [.create, .exclusiveCreate, .closeOnExec],
                                                   permissions: [.ownerReadWrite])
                _ = try data.withUnsafeBytes { try file.writeAll($0) }
                guard fsync(file.rawValue) == 0 else { throw Errno(rawValue: errno) }
                try file.close()
                guard rename(temporary.string, target.string) == 0 else { throw Errno(rawValue: errno) }
                if synchronizeDirectory {
                    let parent = try FileDescriptor.open(folder, .readOnly, options: [.directory, .closeOnExec])
                    defer { try? parent.close() }
                    guard fsync(parent.rawValue) == 0 else { throw Errno(rawValue: errno) }
                }
            }
        }
    }
}
