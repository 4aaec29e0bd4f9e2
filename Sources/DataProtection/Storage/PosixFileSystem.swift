import Foundation
import SodiumBridge
import SystemPackage
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The real file system, through swift-system's `FileDescriptor`.
///
/// The calls swift-system does not wrap (`fsync`, `fdatasync`, `rename`, `unlink`, `mkdir`, `fstatvfs`)
/// are made here and nowhere else; each `errno` becomes a ``DataProtectionError``
/// naming the operation and the path.
package struct PosixFileSystem: FileSystem {
    package init() {}

    package func readFile(at path: FilePath, limit: Int) throws(DataProtectionError) -> Data? {
        guard let descriptor = try openForReading(path) else { return nil }
        defer { try? descriptor.close() }
        // Checked before a byte is read: a planted sparse file of gigabytes costs nothing to make.
        let size = try call("lseek", path) { try descriptor.seek(offset: 0, from: .end) }
        guard size <= Int64(limit) else { throw Self.tooLong(path, size: size, limit: limit) }
        _ = try call("lseek", path) { try descriptor.seek(offset: 0, from: .start) }
        var result = Data()
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            let count = try call("read", path) {
                try buffer.withUnsafeMutableBytes { try descriptor.read(into: $0) }
            }
            if count == 0 { break }
            result.append(contentsOf: buffer[0..<count])
            // Grown while it was read: still refused, with at most one buffer more than the limit read.
            guard result.count <= limit else { throw Self.tooLong(path, size: Int64(result.count), limit: limit) }
        }
        return result
    }

    private static func tooLong(_ path: FilePath, size: Int64, limit: Int) -> DataProtectionError {
        .integrity("\(path) is \(size) bytes long, more than such a file can be (\(limit) bytes): it is not the store's, or it was tampered with.")
    }

    package func readSecretFile(at path: FilePath) throws(DataProtectionError) -> SecureBytes? {
        guard let descriptor = try openForReading(path) else { return nil }
        defer { try? descriptor.close() }
        let size = try call("lseek", path) { try descriptor.seek(offset: 0, from: .end) }
        guard size <= 64 * 1024 else {
            throw .integrity("\(path) is \(size) bytes long, far more than a key file can be.")
        }
        _ = try call("lseek", path) { try descriptor.seek(offset: 0, from: .start) }
        let secret = SecureBytes(count: Int(size))
        var filled = 0
        while filled < secret.count {
            let count = try call("read", path) {
                try secret.withUnsafeMutableBytes { buffer in
                    try descriptor.read(into: UnsafeMutableRawBufferPointer(rebasing: buffer[filled...]))
                }
            }
            if count == 0 { break }
            filled += count
        }
        guard filled == secret.count else {
            throw .integrity("\(path) changed size while it was read.")
        }
        return secret
    }

    package func createFile(at path: FilePath) throws(DataProtectionError) -> FileDescriptor {
        try call("open", path) {
            try FileDescriptor.open(
                path, .readWrite,
                options: [.create, .exclusiveCreate, .closeOnExec],
                permissions: [.ownerReadWrite])
        }
    }

    package func write(_ bytes: FileBytes, to descriptor: FileDescriptor, path: FilePath) throws(DataProtectionError) {
        _ = try call("write", path) {
            switch bytes {
            case .data(let data):
                try data.withUnsafeBytes { try descriptor.writeAll($0) }
            case .secret(let secret):
                try secret.withUnsafeBytes { try descriptor.writeAll($0) }
            }
        }
    }

    /// On Linux `fdatasync`: the data and what reading it back needs (the size, the block
    /// map), without the timestamps, whose change would otherwise commit the file system's
    /// journal at every call even when a file is written over in place (SQLite syncs the same
    /// way). Elsewhere `fsync`.
    package func synchronize(_ descriptor: FileDescriptor, path: FilePath) throws(DataProtectionError) {
        #if os(Linux)
        try check("fdatasync", path, fdatasync(descriptor.rawValue))
        #else
        try check("fsync", path, fsync(descriptor.rawValue))
        #endif
    }

    package func close(_ descriptor: FileDescriptor, path: FilePath) throws(DataProtectionError) {
        try call("close", path) { try descriptor.close() }
    }

    package func rename(_ source: FilePath, to destination: FilePath) throws(DataProtectionError) {
        let status = source.withPlatformString { from in
            destination.withPlatformString { to in systemRename(from, to) }
        }
        try check("rename", destination, status)
    }

    package func link(_ source: FilePath, to destination: FilePath) throws(DataProtectionError) {
        let status = source.withPlatformString { from in
            destination.withPlatformString { to in systemLink(from, to) }
        }
        try check("link", destination, status)
    }

    package func synchronizeDirectory(at path: FilePath) throws(DataProtectionError) {
        let descriptor = try call("open", path) {
            try FileDescriptor.open(path, .readOnly, options: [.directory, .closeOnExec])
        }
        defer { try? descriptor.close() }
        try check("fsync", path, fsync(descriptor.rawValue))
    }

    package func removeFile(at path: FilePath) throws(DataProtectionError) {
        let status = path.withPlatformString { unlink($0) }
        if status != 0 && errno == ENOENT { return }
        try check("unlink", path, status)
    }

    package func createDirectory(at path: FilePath) throws(DataProtectionError) {
        let status = path.withPlatformString { mkdir($0, 0o700) }
        if status != 0 && errno == EEXIST, let existing = try? path.stat(followTargetSymlink: false), existing.type == .directory {
            // Another user who may write here may rename the store's files away, or plant links.
            let mode = existing.permissions.rawValue & 0o7777
            guard mode & 0o022 == 0 else {
                throw DataProtectionError(
                    .invalidArgument,
                    "\(path) can be written by other users (mode \(String(mode, radix: 8))): they could rename or replace the store's files.",
                    hint: "Restrict it to its owner (`chmod go-w \(path)`, or `chmod 700`), or choose another directory.")
            }
            return
        }
        try check("mkdir", path, status)
        // 0700 whatever the umask (one of 0200 would leave a directory its owner cannot write).
        try check("chmod", path, path.withPlatformString { chmod($0, 0o700) })
    }

    package func contentsOfDirectory(at path: FilePath) throws(DataProtectionError) -> [String] {
        do {
            return try FileManager.default.contentsOfDirectory(atPath: path.string)
        } catch {
            let posix = (error as NSError).userInfo[NSUnderlyingErrorKey] as? NSError
            throw Self.error(for: Errno(rawValue: Int32(posix?.code ?? Int(ENOENT))), operation: "list", path: path)
        }
    }

    // MARK: - Protected data files and the store's tree

    package func openDataFile(at path: FilePath, create: Bool) throws(DataProtectionError) -> FileDescriptor {
        let descriptor = try call("open", path) {
            if create {
                try FileDescriptor.open(path, .readWrite, options: [.create, .exclusiveCreate, .closeOnExec, .noFollow],
                                        permissions: [.ownerReadWrite])
            } else {
                try FileDescriptor.open(path, .readWrite, options: [.closeOnExec, .noFollow, .nonBlocking])
            }
        }
        if !create { try Self.requireRegular(descriptor, path: path) }
        return descriptor
    }

    /// Refuses (`integrityFailure`) anything but a regular file where DataProtection keeps one:
    /// a FIFO, a device or a socket planted in the store or device directory. Closes `descriptor` when it refuses.
    private static func requireRegular(_ descriptor: FileDescriptor, path: FilePath) throws(DataProtectionError) {
        var status = stat()
        guard fstat(descriptor.rawValue, &status) == 0 else {
            let failure = Self.error(for: Errno(rawValue: errno), operation: "fstat", path: path)
            try? descriptor.close()
            throw failure
        }
        guard status.st_mode & S_IFMT == S_IFREG else {
            try? descriptor.close()
            throw .integrity("\(path) is not a regular file (a FIFO, device, socket or directory): DataProtection never makes one there.",
                             hint: "Something outside DataProtection planted it in the store or device directory; remove it.")
        }
    }

    package func read(from descriptor: FileDescriptor, at offset: Int64, count: Int, path: FilePath) throws(DataProtectionError) -> Data {
        var data = Data(uninitializedCount: count)
        var filled = 0
        while filled < count {
            let got = try call("pread", path) {
                try data.withUnsafeMutableBytes { buffer in
                    try descriptor.read(fromAbsoluteOffset: offset + Int64(filled),
                                        into: UnsafeMutableRawBufferPointer(rebasing: buffer[filled...]))
                }
            }
            if got == 0 { break }
            filled += got
        }
        if filled < count { data.removeSubrange(filled...) }
        return data
    }

    package func write(_ data: Data, range: Range<Int>, to descriptor: FileDescriptor, at offset: Int64, path: FilePath) throws(DataProtectionError) {
        _ = try call("pwrite", path) {
            try data.withUnsafeBytes { buffer in
                try descriptor.writeAll(toAbsoluteOffset: offset, UnsafeRawBufferPointer(rebasing: buffer[range]))
            }
        }
    }

    package func write(_ parts: [FileBytes], to descriptor: FileDescriptor, at offset: Int64, path: FilePath) throws(DataProtectionError) {
        var position = offset
        for part in parts {
            _ = try call("pwrite", path) {
                switch part {
                case .data(let data):
                    try data.withUnsafeBytes { try descriptor.writeAll(toAbsoluteOffset: position, $0) }
                case .secret(let secret):
                    try secret.withUnsafeBytes { try descriptor.writeAll(toAbsoluteOffset: position, $0) }
                }
            }
            position += Int64(part.count)
        }
    }

    package func resize(_ descriptor: FileDescriptor, to size: Int64, path: FilePath) throws(DataProtectionError) {
        try call("ftruncate", path) { try descriptor.resize(to: size) }
    }

    package func availableCapacity(of descriptor: FileDescriptor, path: FilePath) throws(DataProtectionError) -> UInt64? {
        var info = statvfs()
        try check("fstatvfs", path, fstatvfs(descriptor.rawValue, &info))
        let (bytes, overflow) = UInt64(info.f_bavail).multipliedReportingOverflow(by: UInt64(info.f_frsize))
        return overflow ? .max : bytes
    }

    package func status(of descriptor: FileDescriptor, path: FilePath) throws(DataProtectionError) -> FileStatus {
        try call("fstat", path) { Self.status(try descriptor.stat()) }
    }

    package func status(at path: FilePath) throws(DataProtectionError) -> FileStatus? {
        do {
            return Self.status(try path.stat(followTargetSymlink: false))
        } catch where error == .noSuchFileOrDirectory {
            return nil
        } catch {
            throw Self.error(for: error, operation: "stat", path: path)
        }
    }

    package func removeTree(at path: FilePath) throws(DataProtectionError) {
        guard try status(at: path) != nil else { return }
        do {
            // FileManager removes a symbolic link itself, never what it points to.
            try FileManager.default.removeItem(atPath: path.string)
        } catch {
            let posix = (error as NSError).userInfo[NSUnderlyingErrorKey] as? NSError
            if posix?.code == Int(ENOENT) { return }
            throw Self.error(for: Errno(rawValue: Int32(posix?.code ?? Int(EIO))), operation: "remove", path: path)
        }
    }

    private static func status(_ stat: Stat) -> FileStatus {
        let kind: FileStatus.Kind = switch stat.type {
        case .regular: .regular
        case .directory: .directory
        default: .other
        }
        let time = stat.st_mtim
        return FileStatus(
            kind: kind, identity: FileIdentity(device: UInt64(stat.deviceID.rawValue), inode: UInt64(stat.inode.rawValue)),
            size: Int64(stat.size), modificationDate: Date(timeIntervalSince1970: Double(time.tv_sec) + Double(time.tv_nsec) / 1e9),
            linkCount: stat.linkCount)
    }

    // MARK: - errno to DataProtectionError

    private func openForReading(_ path: FilePath) throws(DataProtectionError) -> FileDescriptor? {
        do {
            // Never through a link planted in the store or device directory, never waiting on a
            // FIFO planted there (O_NONBLOCK: opening one for reading would wait for a writer).
            let descriptor = try FileDescriptor.open(path, .readOnly, options: [.closeOnExec, .noFollow, .nonBlocking])
            try Self.requireRegular(descriptor, path: path)
            return descriptor
        } catch let error as DataProtectionError {
            throw error
        } catch let errno as Errno where errno == .noSuchFileOrDirectory {
            return nil
        } catch let errno as Errno {
            throw Self.error(for: errno, operation: "open", path: path)
        } catch {
            throw DataProtectionError(.ioFailure, "open \(path): \(error)")
        }
    }

    private func call<R>(_ operation: String, _ path: FilePath, _ body: () throws -> R) throws(DataProtectionError) -> R {
        do {
            return try body()
        } catch let errno as Errno {
            throw Self.error(for: errno, operation: operation, path: path)
        } catch {
            throw DataProtectionError(.ioFailure, "\(operation) \(path): \(error)")
        }
    }

    private func check(_ operation: String, _ path: FilePath, _ status: Int32) throws(DataProtectionError) {
        guard status != 0 else { return }
        throw Self.error(for: Errno(rawValue: errno), operation: operation, path: path)
    }

    /// Maps an `errno` to the contract's codes; what has no code of its own is an ``DataProtectionError/Code/ioFailure``.
    static func error(for errno: Errno, operation: String, path: FilePath) -> DataProtectionError {
        let what = "\(operation) \(path): \(errno)"
        switch errno {
        case .noSuchFileOrDirectory: return DataProtectionError(.fileNotFound, what)
        case .fileExists: return DataProtectionError(.fileExists, what)
        case .notDirectory: return DataProtectionError(.notADirectory, what)
        case .isDirectory: return DataProtectionError(.isADirectory, what)
        case .directoryNotEmpty: return DataProtectionError(.directoryNotEmpty, what)
        case .tooManySymbolicLinkLevels:
            // What `O_NOFOLLOW` reports for a link: DataProtection never makes one.
            return DataProtectionError(.invalidPath, "\(what): a symbolic link where DataProtection keeps a file",
                                       hint: "Something outside DataProtection planted a link in the store or device directory; remove it.")
        case .noSpace: return DataProtectionError(.ioFailure, what, hint: "The disk is full; free some space and try again.")
        case .permissionDenied, .notPermitted:
            return DataProtectionError(.ioFailure, what, hint: "Check the permissions of the store directory.")
        default: return DataProtectionError(.ioFailure, what)
        }
    }
}

private func systemRename(_ from: UnsafePointer<CChar>, _ to: UnsafePointer<CChar>) -> Int32 {
    #if canImport(Glibc)
    Glibc.rename(from, to)
    #else
    Darwin.rename(from, to)
    #endif
}

private func systemLink(_ from: UnsafePointer<CChar>, _ to: UnsafePointer<CChar>) -> Int32 {
    #if canImport(Glibc)
    Glibc.link(from, to)
    #else
    Darwin.link(from, to)
    #endif
}
