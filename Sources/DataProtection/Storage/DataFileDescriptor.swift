import Foundation
import SystemPackage

/// A protected file's descriptor: positioned reads and writes, resize, `fsync`
/// and size, each one call of the ``FileSystem`` it was opened on (whose `errno`
/// becomes a ``DataProtectionError`` naming the operation and the path).
struct DataFileDescriptor: Sendable {
    let descriptor: FileDescriptor
    let path: FilePath
    let fileSystem: any FileSystem

    /// Opens an existing file for reading and writing (not through a symbolic link).
    static func open(_ path: FilePath, fileSystem: any FileSystem) throws(DataProtectionError) -> DataFileDescriptor {
        DataFileDescriptor(descriptor: try fileSystem.openDataFile(at: path, create: false), path: path, fileSystem: fileSystem)
    }

    /// Creates a new file (mode 0600), failing if anything exists at `path`.
    static func create(_ path: FilePath, fileSystem: any FileSystem) throws(DataProtectionError) -> DataFileDescriptor {
        DataFileDescriptor(descriptor: try fileSystem.openDataFile(at: path, create: true), path: path, fileSystem: fileSystem)
    }

    /// The same descriptor, known by a new path (after a rename).
    func moved(to path: FilePath) -> DataFileDescriptor {
        DataFileDescriptor(descriptor: descriptor, path: path, fileSystem: fileSystem)
    }

    /// Reads up to `count` bytes at `offset`; fewer only at the end of the file.
    func read(at offset: Int64, count: Int) throws(DataProtectionError) -> Data {
        try fileSystem.read(from: descriptor, at: offset, count: count, path: path)
    }

    /// Writes all of `data[range]` at `offset`.
    func write(_ data: Data, range: Range<Int>? = nil, at offset: Int64) throws(DataProtectionError) {
        try fileSystem.write(data, range: range ?? 0..<data.count, to: descriptor, at: offset, path: path)
    }

    /// `ftruncate`.
    func resize(to size: Int64) throws(DataProtectionError) {
        try fileSystem.resize(descriptor, to: size, path: path)
    }

    /// `fsync`.
    func synchronize() throws(DataProtectionError) {
        try fileSystem.synchronize(descriptor, path: path)
    }

    /// The physical size.
    func size() throws(DataProtectionError) -> Int64 {
        try fileSystem.status(of: descriptor, path: path).size
    }

    /// Identity of the underlying file (device and inode): what handles share.
    func identity() throws(DataProtectionError) -> FileIdentity {
        try fileSystem.status(of: descriptor, path: path).identity
    }

    func close() {
        try? fileSystem.close(descriptor, path: path)
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
