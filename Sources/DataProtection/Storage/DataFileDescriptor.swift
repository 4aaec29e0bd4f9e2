import Foundation
import SystemPackage
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A protected file's descriptor: positioned reads and writes, resize, `fsync`
/// and size, with every `errno` turned into a ``DataProtectionError`` naming the
/// operation and the path.
struct DataFileDescriptor: Sendable {
    let descriptor: FileDescriptor
    let path: FilePath

    /// Opens an existing file for reading and writing.
    static func open(_ path: FilePath) throws(DataProtectionError) -> DataFileDescriptor {
        let descriptor = try call("open", path) {
            try FileDescriptor.open(path, .readWrite, options: [.closeOnExec, .noFollow])
        }
        return DataFileDescriptor(descriptor: descriptor, path: path)
    }

    /// Creates a new file (mode 0600), failing if one exists.
    static func create(_ path: FilePath) throws(DataProtectionError) -> DataFileDescriptor {
        let descriptor = try call("open", path) {
            try FileDescriptor.open(path, .readWrite, options: [.create, .exclusiveCreate, .closeOnExec, .noFollow],
                                    permissions: [.ownerReadWrite])
        }
        return DataFileDescriptor(descriptor: descriptor, path: path)
    }

    /// Reads up to `count` bytes at `offset`; fewer only at the end of the file.
    func read(at offset: Int64, count: Int) throws(DataProtectionError) -> Data {
        var data = Data(uninitializedCount: count)
        var filled = 0
        while filled < count {
            let got = try Self.call("pread", path) {
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

    /// Writes all of `data[range]` at `offset`.
    func write(_ data: Data, range: Range<Int>? = nil, at offset: Int64) throws(DataProtectionError) {
        let range = range ?? 0..<data.count
        _ = try Self.call("pwrite", path) {
            try data.withUnsafeBytes { buffer in
                try descriptor.writeAll(toAbsoluteOffset: offset, UnsafeRawBufferPointer(rebasing: buffer[range]))
            }
        }
    }

    /// `ftruncate`.
    func resize(to size: Int64) throws(DataProtectionError) {
        try Self.call("ftruncate", path) { try descriptor.resize(to: size) }
    }

    /// `fsync`.
    func synchronize() throws(DataProtectionError) {
        guard fsync(descriptor.rawValue) == 0 else {
            throw PosixFileSystem.error(for: Errno(rawValue: errno), operation: "fsync", path: path)
        }
    }

    /// The physical size.
    func size() throws(DataProtectionError) -> Int64 {
        try Self.call("fstat", path) { try descriptor.stat().size }
    }

    /// Identity of the underlying file (device and inode): what handles share.
    func identity() throws(DataProtectionError) -> FileIdentity {
        try Self.call("fstat", path) {
            let stat = try descriptor.stat()
            return FileIdentity(device: UInt64(stat.deviceID.rawValue), inode: UInt64(stat.inode.rawValue))
        }
    }

    func close() {
        try? descriptor.close()
    }

    private static func call<R>(_ operation: String, _ path: FilePath, _ body: () throws -> R) throws(DataProtectionError) -> R {
        do {
            return try body()
        } catch let errno as Errno {
            throw PosixFileSystem.error(for: errno, operation: operation, path: path)
        } catch {
            throw DataProtectionError(.ioFailure, "\(operation) \(path): \(error)")
        }
    }
}

extension Data {
    /// `count` bytes left uninitialized (no zeroing): only for buffers every byte of which is
    /// written before it is read, such as records being sealed or read from disk.
    init(uninitializedCount count: Int) {
        guard count > 0, let bytes = malloc(count) else {
            self.init(count: count)
            return
        }
        self.init(bytesNoCopy: bytes, count: count, deallocator: .free)
    }
}

/// A file's identity on disk: open handles on the same file share one ``OpenFile``.
struct FileIdentity: Hashable, Sendable {
    let device: UInt64
    let inode: UInt64
}
