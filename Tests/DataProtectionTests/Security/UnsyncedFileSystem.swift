import Foundation
import SystemPackage
@testable import DataProtection

/// The real file system without `fsync`: for stress runs, where thousands of lock
/// flushes would otherwise wait on the disk. Durability is not what they test.
struct UnsyncedFileSystem: ForwardingFileSystem {
    let base = PosixFileSystem()

    func synchronize(_ descriptor: FileDescriptor, path: FilePath) throws(DataProtectionError) {}
    func synchronizeDirectory(at path: FilePath) throws(DataProtectionError) {}
}
