import Foundation
import SodiumBridge
import SystemPackage

/// Bytes to write to a file: public parts and secret parts, in order.
///
/// Secret parts are written straight from secure memory, so a key file never
/// passes through a `Data`.
package enum FileBytes: Sendable {
    case data(Data)
    case secret(SecureBytes)

    var count: Int {
        switch self {
        case .data(let data): data.count
        case .secret(let secret): secret.count
        }
    }
}

/// The file-system operations the device and the store use: every system call
/// DataProtection makes on its files goes through one of these.
///
/// The most bytes any small file of a store or device is read with (device key, effaceable
/// key, keybag, attempt counter, erase mark, `dpdir`, `.dpstore`: all under 1 KiB, in every
/// layout): a larger one is refused unread (`Keys/file-format.md` §12.1).
package let smallFileByteLimit = 4096

/// One protocol so that tests can inject I/O faults and crashes between any two
/// operations (see ``AtomicFileWriter``). ``PosixFileSystem`` is the real one; a
/// ``Device`` is given one (package `init`), and its ``ProtectedStore`` uses the same.
/// No operation follows a symbolic link in its last component.
package protocol FileSystem: Sendable {
    /// The whole file, or `nil` if nothing exists at `path`; `integrityFailure` without
    /// reading it if it is longer than `limit` bytes (every file the store reads whole has
    /// a bound: `Keys/file-format.md` §12.1).
    func readFile(at path: FilePath, limit: Int) throws(DataProtectionError) -> Data?
    /// The whole (small) file read into secure memory, or `nil` if nothing exists at `path`.
    func readSecretFile(at path: FilePath) throws(DataProtectionError) -> SecureBytes?
    /// Creates a new file (mode 0600) for writing (and reading back: a kept journal's records
    /// are read from it); fails with `fileExists` if one exists.
    func createFile(at path: FilePath) throws(DataProtectionError) -> FileDescriptor
    /// Writes all the bytes at the current offset.
    func write(_ bytes: FileBytes, to descriptor: FileDescriptor, path: FilePath) throws(DataProtectionError)
    /// `fsync`: makes the file's data and size durable.
    func synchronize(_ descriptor: FileDescriptor, path: FilePath) throws(DataProtectionError)
    /// Closes a descriptor.
    func close(_ descriptor: FileDescriptor, path: FilePath) throws(DataProtectionError)
    /// `rename`: atomically replaces `destination` with `source`.
    func rename(_ source: FilePath, to destination: FilePath) throws(DataProtectionError)
    /// `link`: gives the file at `source` the second name `destination` (which must not
    /// exist). What moves a database's side files with it, so that one name or the other
    /// is beside the database at every instant.
    func link(_ source: FilePath, to destination: FilePath) throws(DataProtectionError)
    /// `fsync` of a directory: makes renames, creations and removals in it durable.
    func synchronizeDirectory(at path: FilePath) throws(DataProtectionError)
    /// `unlink`; a missing file is not an error.
    func removeFile(at path: FilePath) throws(DataProtectionError)
    /// `mkdir` with mode 0700; an existing directory is not an error.
    func createDirectory(at path: FilePath) throws(DataProtectionError)
    /// The names in a directory, without `.` and `..`.
    func contentsOfDirectory(at path: FilePath) throws(DataProtectionError) -> [String]

    // MARK: Protected data files and the store's tree

    /// Opens a protected data file for reading and writing; with `create`, a new
    /// file (mode 0600), failing with `fileExists` if anything exists at `path`.
    func openDataFile(at path: FilePath, create: Bool) throws(DataProtectionError) -> FileDescriptor
    /// `pread`: up to `count` bytes at `offset`, fewer only at the end of the file.
    func read(from descriptor: FileDescriptor, at offset: Int64, count: Int, path: FilePath) throws(DataProtectionError) -> Data
    /// `pwrite`: all of `data[range]` at `offset`.
    func write(_ data: Data, range: Range<Int>, to descriptor: FileDescriptor, at offset: Int64, path: FilePath) throws(DataProtectionError)
    /// `pwrite`: `parts` one after the other from `offset`, secret parts straight from
    /// secure memory (an in-place overwrite of a small key file).
    func write(_ parts: [FileBytes], to descriptor: FileDescriptor, at offset: Int64, path: FilePath) throws(DataProtectionError)
    /// `ftruncate`.
    func resize(_ descriptor: FileDescriptor, to size: Int64, path: FilePath) throws(DataProtectionError)
    /// `fstat`.
    func status(of descriptor: FileDescriptor, path: FilePath) throws(DataProtectionError) -> FileStatus
    /// `lstat`: the entry at `path` itself (a symbolic link is reported, not followed); `nil` if nothing is there.
    func status(at path: FilePath) throws(DataProtectionError) -> FileStatus?
    /// Removes a file, or a directory and everything in it, without following symbolic
    /// links; a missing entry is not an error.
    func removeTree(at path: FilePath) throws(DataProtectionError)
    /// The bytes an unprivileged writer may still add to the file system holding the open file
    /// `descriptor` (`fstatvfs`), or `nil` when that cannot be known.
    func availableCapacity(of descriptor: FileDescriptor, path: FilePath) throws(DataProtectionError) -> UInt64?
    /// How long a writer lets a chain of journals grow before its checkpoint
    /// (`Keys/file-format.md` §8.2, "Chained commits"): ``JournalChainLimit/standard`` unless
    /// a test file system that cuts the power at every call asks for shorter chains.
    var journalChainLimit: JournalChainLimit { get }
}

/// How long a writer lets a chain of journals grow: at most `commits` journals and `bytes`
/// bytes (more only for a single journal, which starts a chain of its own), within what a
/// reader accepts (``FileJournal/maximumChain``, ``FileJournal/maximumByteCount(recordStride:)``).
package struct JournalChainLimit: Sendable {
    package var commits: UInt32
    package var bytes: Int

    package init(commits: UInt32, bytes: Int) {
        precondition(commits >= 1 && commits <= UInt32(FileJournal.maximumChain) && bytes <= FileJournal.maximumChainByteCount,
                     "a chain no reader would accept")
        self.commits = commits
        self.bytes = bytes
    }

    /// As long as a reader accepts: a SQLite WAL's records stay in the chain (written once, to
    /// the journal) until SQLite starts its WAL over, some 1,000 pages later.
    package static let standard = JournalChainLimit(commits: UInt32(FileJournal.maximumChain), bytes: FileJournal.maximumChainByteCount)
}

/// Writes a file atomically: a temporary file beside it, `fsync`, `rename` over
/// the target, `fsync` of the directory. A crash at any instant leaves either
/// the old file or the new one, never a mixture, and the old one stays until
/// the new one is durable.
package struct AtomicFileWriter: Sendable {
    /// Prefix of temporary files; anything starting with it is debris of a crash.
    package static let temporaryPrefix = ".tmp-"

    let fileSystem: any FileSystem

    package init(fileSystem: any FileSystem) {
        self.fileSystem = fileSystem
    }

    /// Replaces (or creates) the file at `path` with `parts`. The new content is always
    /// `fsync`ed before the rename, so a power cut leaves the old file or the new one,
    /// never a torn one; with `durable` false the directory is not `fsync`ed, so the
    /// rename itself may be lost (the old file stays).
    package func write(_ parts: [FileBytes], to path: FilePath, durable: Bool = true) throws(DataProtectionError) {
        guard let name = path.lastComponent?.string else {
            throw .invalidArgument("No file name in \(path).")
        }
        let directory = path.removingLastComponent()
        let suffix = Random.bytes(count: 8).map { String(format: "%02x", $0) }.joined()
        let temporary = directory.appending(Self.temporaryPrefix + name + "-" + suffix)
        let descriptor = try fileSystem.createFile(at: temporary)
        do {
            for part in parts {
                try fileSystem.write(part, to: descriptor, path: temporary)
            }
            try fileSystem.synchronize(descriptor, path: temporary)
        } catch {
            try? fileSystem.close(descriptor, path: temporary)
            try? fileSystem.removeFile(at: temporary)
            throw error
        }
        do {
            try fileSystem.close(descriptor, path: temporary)
            try fileSystem.rename(temporary, to: path)
        } catch {
            try? fileSystem.removeFile(at: temporary)
            throw error
        }
        if durable { try fileSystem.synchronizeDirectory(at: directory) }
    }

    /// Removes temporary files left in `directory` by an interrupted write.
    package func removeDebris(in directory: FilePath) throws(DataProtectionError) {
        for name in try fileSystem.contentsOfDirectory(at: directory) where name.hasPrefix(Self.temporaryPrefix) {
            try fileSystem.removeFile(at: directory.appending(name))
        }
    }
}

extension FileSystem {
    /// Not supported by default: a move that needs a second name fails (`ioFailure`) and changes nothing.
    package func link(_ source: FilePath, to destination: FilePath) throws(DataProtectionError) {
        throw DataProtectionError(.ioFailure, "link \(destination): this file system makes no hard links.")
    }

    /// Unknown by default (a file system that does not say is never refused a growth).
    package func availableCapacity(of descriptor: FileDescriptor, path: FilePath) throws(DataProtectionError) -> UInt64? { nil }

    package var journalChainLimit: JournalChainLimit { .standard }
}
