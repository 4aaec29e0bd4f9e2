import Foundation
import SodiumBridge
import SystemPackage
@testable import DataProtection

/// A test double that forwards every file-system call to ``base``: a double
/// states only the calls it changes (drops `fsync`s, records writes, …).
protocol ForwardingFileSystem: FileSystem {
    var base: PosixFileSystem { get }
}

extension ForwardingFileSystem {
    func readFile(at path: FilePath, limit: Int) throws(DataProtectionError) -> Data? { try base.readFile(at: path, limit: limit) }
    func readSecretFile(at path: FilePath) throws(DataProtectionError) -> SecureBytes? { try base.readSecretFile(at: path) }
    func createFile(at path: FilePath) throws(DataProtectionError) -> FileDescriptor { try base.createFile(at: path) }
    func write(_ bytes: FileBytes, to descriptor: FileDescriptor, path: FilePath) throws(DataProtectionError) {
        try base.write(bytes, to: descriptor, path: path)
    }
    func synchronize(_ descriptor: FileDescriptor, path: FilePath) throws(DataProtectionError) {
        try base.synchronize(descriptor, path: path)
    }
    func close(_ descriptor: FileDescriptor, path: FilePath) throws(DataProtectionError) { try base.close(descriptor, path: path) }
    func rename(_ source: FilePath, to destination: FilePath) throws(DataProtectionError) { try base.rename(source, to: destination) }
    func link(_ source: FilePath, to destination: FilePath) throws(DataProtectionError) { try base.link(source, to: destination) }
    func synchronizeDirectory(at path: FilePath) throws(DataProtectionError) { try base.synchronizeDirectory(at: path) }
    func removeFile(at path: FilePath) throws(DataProtectionError) { try base.removeFile(at: path) }
    func createDirectory(at path: FilePath) throws(DataProtectionError) { try base.createDirectory(at: path) }
    func contentsOfDirectory(at path: FilePath) throws(DataProtectionError) -> [String] { try base.contentsOfDirectory(at: path) }
    func openDataFile(at path: FilePath, create: Bool) throws(DataProtectionError) -> FileDescriptor {
        try base.openDataFile(at: path, create: create)
    }
    func read(from descriptor: FileDescriptor, at offset: Int64, count: Int, path: FilePath) throws(DataProtectionError) -> Data {
        try base.read(from: descriptor, at: offset, count: count, path: path)
    }
    func write(_ data: Data, range: Range<Int>, to descriptor: FileDescriptor, at offset: Int64, path: FilePath) throws(DataProtectionError) {
        try base.write(data, range: range, to: descriptor, at: offset, path: path)
    }
    func write(_ parts: [FileBytes], to descriptor: FileDescriptor, at offset: Int64, path: FilePath) throws(DataProtectionError) {
        try base.write(parts, to: descriptor, at: offset, path: path)
    }
    func resize(_ descriptor: FileDescriptor, to size: Int64, path: FilePath) throws(DataProtectionError) {
        try base.resize(descriptor, to: size, path: path)
    }
    func status(of descriptor: FileDescriptor, path: FilePath) throws(DataProtectionError) -> FileStatus {
        try base.status(of: descriptor, path: path)
    }
    func status(at path: FilePath) throws(DataProtectionError) -> FileStatus? { try base.status(at: path) }
    func removeTree(at path: FilePath) throws(DataProtectionError) { try base.removeTree(at: path) }
}

extension ForwardingFileSystem {
    func availableCapacity(of descriptor: FileDescriptor, path: FilePath) throws(DataProtectionError) -> UInt64? {
        try base.availableCapacity(of: descriptor, path: path)
    }
}
