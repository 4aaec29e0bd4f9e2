import Foundation
import SodiumBridge
import SystemPackage
import Testing
@testable import DataProtection

/// A lock with many open `complete` handles holding unsynced writes: the files
/// flush on parallel threads, and every one of them must be durable (its data
/// `fsync`ed after its last write) before the keys go; every acknowledged write
/// must read back after the next unlock.
@Suite struct LockFlushTests {
    /// Forwards to ``PosixFileSystem`` and tracks, per open data file, whether it was
    /// written since its last `fsync` (thread-safe: the flushes run in parallel).
    final class SyncTrackingFileSystem: ForwardingFileSystem {
        let base = PosixFileSystem()
        private let unsynced = Locked<Set<CInt>>([])
        private let threads = Locked<Set<UInt>>([])
        private let dataWrites = Locked(0)

        /// Open descriptors written since their last `fsync`.
        var unsyncedCount: Int { unsynced.withLock { $0.count } }
        /// How many different threads called `fsync`.
        var syncingThreads: Int { threads.withLock { $0.count } }
        /// Data-file writes so far.
        var writes: Int { dataWrites.withLock { $0 } }
        func forgetThreads() { threads.withLock { $0.removeAll() } }

        func synchronize(_ descriptor: FileDescriptor, path: FilePath) throws(DataProtectionError) {
            try base.synchronize(descriptor, path: path)
            // A slow disk (2 ms a flush): one thread alone would take over a second for the
            // files of the test, so the flushing threads all get started, however busy the machine.
            usleep(2000)
            _ = unsynced.withLock { $0.remove(descriptor.rawValue) }
            let thread = UInt(bitPattern: Int(bitPattern: pthread_self()))
            _ = threads.withLock { $0.insert(thread) }
        }
        func close(_ descriptor: FileDescriptor, path: FilePath) throws(DataProtectionError) {
            _ = unsynced.withLock { $0.remove(descriptor.rawValue) }
            try base.close(descriptor, path: path)
        }
        func write(_ data: Data, range: Range<Int>, to descriptor: FileDescriptor, at offset: Int64, path: FilePath) throws(DataProtectionError) {
            try base.write(data, range: range, to: descriptor, at: offset, path: path)
            _ = unsynced.withLock { $0.insert(descriptor.rawValue) }
            dataWrites.withLock { $0 += 1 }
        }
        func resize(_ descriptor: FileDescriptor, to size: Int64, path: FilePath) throws(DataProtectionError) {
            try base.resize(descriptor, to: size, path: path)
            _ = unsynced.withLock { $0.insert(descriptor.rawValue) }
        }
    }

    @Test("lock with 200 dirty complete handles: every file durable before the keys go, every write kept", arguments: [false, true])
    func manyDirtyHandles(overwrite: Bool) throws {
        try withScratchDirectory { root in
            let fileSystem = SyncTrackingFileSystem()
            let store = try ProtectedStore(directory: root, clock: VirtualClock(), configuration: .testing(), fileSystem: fileSystem)
            try store.device.unlock()
            try store.device.setPasscode("1234")
            var handles: [ProtectedFileHandle] = []
            var expected: [Data] = []
            for index in 0..<200 {
                let handle = try store.openFile(atPath: "d/f\(index)", create: true, protection: .complete)
                if overwrite {
                    // Committed content first, then an unsynced overwrite (the journal path).
                    try handle.write(contentsOf: Data(repeating: 1, count: 20_000))
                    try handle.synchronize()
                    try handle.seek(toOffset: 100)
                }
                let data = Data("write \(index) ".utf8) + Data(repeating: UInt8(index & 0xFF), count: index * 37)
                try handle.write(contentsOf: data)
                handles.append(handle)
                var content = overwrite ? Data(repeating: 1, count: 20_000) : Data()
                let start = overwrite ? 100 : 0
                if content.count < start + data.count { content.append(Data(count: start + data.count - content.count)) }
                content.replaceSubrange(start..<start + data.count, with: data)
                expected.append(content)
            }
            fileSystem.forgetThreads()
            let writesBefore = fileSystem.writes
            try store.device.lock()  // grace 0: keys are wiped when this returns
            #expect(fileSystem.writes >= writesBefore + 200, "the lock flushed every file's cached writes")
            #expect(fileSystem.unsyncedCount == 0, "every written file was fsynced before the keys went")
            #expect(fileSystem.syncingThreads > 1, "the flushes ran on parallel threads")
            for handle in handles {
                #expect(throws: DataProtectionError.self) { try handle.write(contentsOf: Data("late".utf8)) }
            }
            try store.device.unlock(passcode: "1234")
            for (index, handle) in handles.enumerated() {
                try handle.close()
                #expect(try store.contents(atPath: "d/f\(index)") == expected[index], "file \(index)")
            }
        }
    }
}
