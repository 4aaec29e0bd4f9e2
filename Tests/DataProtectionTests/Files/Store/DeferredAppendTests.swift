import Foundation
import SodiumBridge
import SystemPackage
import Testing
@testable import DataProtection

/// Appends through a handle without `synchronize()`: the records go to disk as the
/// cache fills, but the header commits them only at the next durable flush. The
/// appends must read back before that (through the writing handle and others),
/// cost only the ordering `fsync`s of allocations (which double), never a journal,
/// be lost whole by a crash (the previous commit stays readable), and leave the
/// file at rest (exact size) once committed.
@Suite struct DeferredAppendTests {
    /// Counts `fsync`s and journal creations, and remembers the data files' paths.
    final class CountingFileSystem: ForwardingFileSystem {
        let base = PosixFileSystem()
        private let counts = Locked((syncs: 0, journals: 0, dataFiles: Set<String>(), dataWrites: 0, dataReads: 0))

        var syncs: Int { counts.withLock { $0.syncs } }
        /// `pwrite`s of records or headers (a journal's are not counted).
        var dataWrites: Int { counts.withLock { $0.dataWrites } }
        /// Positioned reads of a data file (a journal's are not counted).
        var dataReads: Int { counts.withLock { $0.dataReads } }
        var journals: Int { counts.withLock { $0.journals } }
        var dataFiles: Set<String> { counts.withLock { $0.dataFiles } }

        func synchronize(_ descriptor: FileDescriptor, path: FilePath) throws(DataProtectionError) {
            try base.synchronize(descriptor, path: path)
            counts.withLock { $0.syncs += 1 }
        }
        func createFile(at path: FilePath) throws(DataProtectionError) -> FileDescriptor {
            if path.string.hasSuffix(FileJournal.suffix) { counts.withLock { $0.journals += 1 } }
            return try base.createFile(at: path)
        }
        func write(_ data: Data, range: Range<Int>, to descriptor: FileDescriptor, at offset: Int64, path: FilePath) throws(DataProtectionError) {
            try base.write(data, range: range, to: descriptor, at: offset, path: path)
            if !path.string.hasSuffix(FileJournal.suffix) { counts.withLock { $0.dataWrites += 1 } }
        }
        func read(from descriptor: FileDescriptor, at offset: Int64, count: Int, path: FilePath) throws(DataProtectionError) -> Data {
            if !path.string.hasSuffix(FileJournal.suffix) { counts.withLock { $0.dataReads += 1 } }
            return try base.read(from: descriptor, at: offset, count: count, path: path)
        }
        func openDataFile(at path: FilePath, create: Bool) throws(DataProtectionError) -> FileDescriptor {
            counts.withLock { _ = $0.dataFiles.insert(path.string) }
            return try base.openDataFile(at: path, create: create)
        }
    }

    static let chunk = 1 << Int(ProtectedStore.defaultChunkShift)

    /// The exact physical size of a file of `length` bytes at rest.
    static func physicalSize(_ length: Int) -> Int {
        let records = (length + chunk - 1) / chunk
        return FileHeader.regionByteCount + length + records * ChunkRecords.overhead
    }

    @Test("1,000 chunks appended without synchronize: a few allocation fsyncs, no journal, read back before the commit",
          arguments: [20_000, 1 << 20])
    func appendsCostOnlyAllocations(pieceSize: Int) throws {
        try withScratchDirectory { root in
            let fileSystem = CountingFileSystem()
            let store = try ScratchStore.unlocked(at: root, on: fileSystem, passcode: "1234")
            // A committed start that ends inside a chunk: its last chunk changes with the first append.
            let start = patternBytes(30_000, seed: 1)
            try store.write(start, to: "/log")
            let handle = try store.openFile(atPath: "/log", mode: .update)
            _ = try handle.seekToEnd()
            var model = start
            let syncsBefore = fileSystem.syncs
            var piece = 0
            while model.count < 1_000 * Self.chunk {
                let data = patternBytes(pieceSize, seed: UInt64(100 + piece))
                try handle.write(contentsOf: data)
                model.append(data)
                piece += 1
            }
            // Doubling allocations from 2 records to over 1,000: at most 10 ordering fsyncs.
            // (Committing each cache's worth cost 2 fsyncs and, from an unaligned length, a journal.)
            #expect(fileSystem.syncs - syncsBefore <= 10)
            #expect(fileSystem.journals == 0)

            // Before any commit: the writing handle and a second one read the appends back.
            try handle.seek(toOffset: 0)
            #expect(try handle.readToEnd() == model)
            let reader = try store.fileHandle(forReadingAtPath: "/log")
            try reader.seek(toOffset: 25_000)
            #expect(try reader.read(upToCount: 3 * Self.chunk) == model[25_000..<25_000 + 3 * Self.chunk])
            #expect(try store.attributesOfItem(atPath: "/log").size == UInt64(model.count))

            try handle.synchronize()
            try handle.close()
            try reader.close()
            #expect(try store.contents(atPath: "/log") == model)
            // Committed at rest: exactly the records the length needs, nothing allocated ahead left on disk.
            let path = try #require(fileSystem.dataFiles.first { !$0.contains(".tmp-") && $0.contains("/files/") })
            let size = try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int
            #expect(size == Self.physicalSize(model.count))

            let restarted = try ScratchStore.restarted(at: root, replacing: store)
            try restarted.device.unlock(passcode: "1234")
            #expect(try restarted.contents(atPath: "/log") == model)
        }
    }

    @Test("a crash before synchronize keeps the previous commit, readable; the next commit is exact")
    func crashKeepsThePreviousCommit() throws {
        try withScratchDirectory { root in
            let fileSystem = CountingFileSystem()
            let store = try ScratchStore.unlocked(at: root, on: fileSystem, passcode: "1234")
            let committed = patternBytes(50_000, seed: 2)
            try store.write(committed, to: "/f", protection: .complete)
            let handle = try store.openFile(atPath: "/f", mode: .update)
            _ = try handle.seekToEnd()
            for piece in 0..<200 { try handle.write(contentsOf: patternBytes(10_000, seed: UInt64(200 + piece))) }
            try store.device.crash()

            try store.device.unlock(passcode: "1234")
            #expect(try store.contents(atPath: "/f") == committed)
            // The records written ahead are tolerated, never read; a new append overwrites and commits them.
            let again = try store.openFile(atPath: "/f", mode: .update)
            _ = try again.seekToEnd()
            let more = patternBytes(5 * Self.chunk + 3, seed: 3)
            try again.write(contentsOf: more)
            try again.close()
            #expect(try store.contents(atPath: "/f") == committed + more)
            let path = try #require(fileSystem.dataFiles.first { !$0.contains(".tmp-") && $0.contains("/files/") })
            let size = try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int
            #expect(size == Self.physicalSize(committed.count + more.count))
        }
    }

    @Test("a write whose cache flush fails changes nothing; the earlier writes stay")
    func failedFlushingWriteChangesNothing() throws {
        try withScratchDirectory { root in
            let fileSystem = FaultInjectingFileSystem()
            let store = try ScratchStore.unlocked(at: root, on: fileSystem, passcode: "1234")
            let handle = try store.openFile(atPath: "/w", create: true)
            var model = Data()
            for piece in 0..<OpenFile.cacheLimit {  // a full cache, nothing flushed yet
                let data = patternBytes(Self.chunk, seed: UInt64(300 + piece))
                try handle.write(contentsOf: data)
                model.append(data)
            }
            fileSystem.arm(FaultInjectingFileSystem.Fault(call: .write, occurrence: 1, errno: .ioError))
            let next = patternBytes(Self.chunk / 2, seed: 400)
            #expect(throws: DataProtectionError.self) { try handle.write(contentsOf: next) }
            fileSystem.arm(nil)
            #expect(try handle.offset() == UInt64(model.count))
            try handle.seek(toOffset: 0)
            #expect(try handle.readToEnd() == model)
            try handle.write(contentsOf: next)
            model.append(next)
            try handle.close()
            #expect(try store.contents(atPath: "/w") == model)
        }
    }

    @Test("truncating into uncommitted appends, then appending again, matches the model after a reboot")
    func truncateInsideTheAppends() throws {
        try withScratchDirectory { root in
            let store = try ScratchStore.unlocked(at: root, on: PosixFileSystem(), passcode: "1234")
            let handle = try store.openFile(atPath: "/t", create: true)
            var model = patternBytes(100 * Self.chunk, seed: 4)
            try handle.write(contentsOf: model)
            // Shorter, inside the appended records (mid-chunk), and longer again (a gap of zeros, then data).
            let cut = 70 * Self.chunk + 1_234
            try handle.truncate(atOffset: UInt64(cut))
            model.removeSubrange(cut...)
            try handle.seek(toOffset: UInt64(60 * Self.chunk))
            #expect(try handle.readToEnd() == model[(60 * Self.chunk)...])
            try handle.truncate(atOffset: UInt64(cut + 5_000))
            model.append(Data(count: 5_000))
            let tail = patternBytes(80 * Self.chunk, seed: 5)
            _ = try handle.seekToEnd()
            try handle.write(contentsOf: tail)
            model.append(tail)
            try store.device.reboot()
            try store.device.unlock(passcode: "1234")
            #expect(try store.contents(atPath: "/t") == model)
        }
    }
}
