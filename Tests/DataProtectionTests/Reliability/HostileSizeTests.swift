import Foundation
import SodiumBridge
import SystemPackage
import Testing
@testable import DataProtection

/// Sizes from a hostile caller or a hostile disk (issue 15): nothing a caller passes aborts
/// the process, a growth the disk cannot hold is refused before it is written, and every
/// file the store reads whole has a bound checked before the first byte is read.
@Suite("Hostile sizes")
struct HostileSizeTests {
    @Test("sizes past the format's maximum are invalidArgument, and the handle goes on unchanged")
    func pastTheMaximum() throws {
        try withStore { fixture in
            let handle = try fixture.store.openFile(atPath: "f", create: true, protection: .complete)
            try handle.write(contentsOf: Data("kept".utf8))
            let maximum = FileHeader.maximumLength
            expectStoreError(.invalidArgument) { try handle.truncate(atOffset: maximum + 1) }
            expectStoreError(.invalidArgument) { try handle.write(contentsOf: Data("x".utf8), atOffset: maximum) }
            // An offset near 2^64 whose end would overflow.
            expectStoreError(.invalidArgument) { try handle.write(contentsOf: Data(count: 10), atOffset: UInt64.max - 4) }
            try handle.seek(toOffset: UInt64.max)
            expectStoreError(.invalidArgument) { try handle.write(contentsOf: Data("x".utf8)) }
            #expect(try handle.size() == 4)
            try handle.synchronize()
            try handle.close()
            #expect(try fixture.store.contents(atPath: "f") == Data("kept".utf8))
        }
    }

    @Test("a growth the disk cannot hold is ioFailure before anything is written; one it can hold is written")
    func growthBeyondFreeSpace() throws {
        let root = IOFaultTests.scratch()
        defer { try? FileManager.default.removeItem(at: root) }
        let fileSystem = SmallDiskFileSystem(available: 32 << 20)
        let store = try ScratchStore.unlocked(at: root, on: fileSystem, passcode: "1234")
        let handle = try store.openFile(atPath: "f", create: true, protection: .complete)
        try handle.write(contentsOf: Data("kept".utf8))
        for size: UInt64 in [100 << 20, 8_000_000_000_000, FileHeader.maximumLength] {
            expectStoreError(.ioFailure, "truncate to \(size)") { try handle.truncate(atOffset: size) }
            expectStoreError(.ioFailure, "a write at \(size)") { try handle.write(contentsOf: Data("x".utf8), atOffset: size - 1) }
        }
        #expect(try handle.size() == 4)
        // Under the free space: written as sealed zeros, in runs (no set of every chunk).
        try handle.truncate(atOffset: 20 << 20)
        try handle.write(contentsOf: Data("end".utf8), atOffset: (20 << 20) - 3)
        try handle.synchronize()
        try handle.close()
        let contents = try store.contents(atPath: "f")
        #expect(contents.count == 20 << 20)
        #expect(contents.prefix(4) == Data("kept".utf8) && contents.suffix(3) == Data("end".utf8))
        #expect(contents.dropFirst(4).dropLast(3).allSatisfy { $0 == 0 })
    }

    @Test("on the real disk, a truncation to 128 TiB fails with ioFailure at once, and the file is intact")
    func realDiskGrowth() throws {
        try withStore { fixture in
            let handle = try fixture.store.openFile(atPath: "f", create: true, protection: .complete)
            try handle.write(contentsOf: Data("kept".utf8))
            expectStoreError(.ioFailure) { try handle.truncate(atOffset: 1 << 47) }
            try handle.close()
            #expect(try fixture.store.contents(atPath: "f") == Data("kept".utf8))
        }
    }

    @Test("planted oversized files are refused unread: a sparse journal, a dpdir")
    func plantedOversizedFiles() throws {
        try withStore { fixture in
            try fixture.store.write(Data("hello".utf8), to: "f", protection: .complete)
            let entries = try FileManager.default.contentsOfDirectory(atPath: fixture.filesDirectory.path)
                .filter { !$0.hasPrefix(".") && $0 != DirectoryMetadata.fileName }
            #expect(entries.count == 1)
            let journal = fixture.filesDirectory.appendingPathComponent(entries[0] + FileJournal.suffix)
            // 300 MB of holes, more than any journal of 16 KiB chunks can be.
            try plantSparseFile(at: journal, size: 300_000_000)
            expectStoreError(.integrityFailure, "a planted journal") { _ = try fixture.store.contents(atPath: "f") }
            try FileManager.default.removeItem(at: journal)
            #expect(try fixture.store.contents(atPath: "f") == Data("hello".utf8))

            try fixture.store.createDirectory(atPath: "d")
            let directory = try FileManager.default.contentsOfDirectory(atPath: fixture.filesDirectory.path)
                .first { !$0.hasPrefix(".") && $0 != DirectoryMetadata.fileName && $0 != entries[0] }
            let metadata = fixture.filesDirectory.appendingPathComponent(try #require(directory)).appendingPathComponent(DirectoryMetadata.fileName)
            try plantSparseFile(at: metadata, size: 1 << 30)
            fixture.store.forgetDirectories()
            expectStoreError(.integrityFailure, "a planted dpdir") { _ = try fixture.store.contentsOfDirectory(atPath: "d") }
        }
    }

    @Test("a planted oversized device file fails the boot with integrityFailure, a planted attempt counter counts as unreadable")
    func plantedDeviceFiles() throws {
        let root = IOFaultTests.scratch()
        defer { try? FileManager.default.removeItem(at: root) }
        let store = try ScratchStore.unlocked(at: root, on: PosixFileSystem(), passcode: "1234")
        let deviceDirectory = root.appendingPathComponent("device")
        let keybag = deviceDirectory.appendingPathComponent("keybag")
        let saved = try Data(contentsOf: keybag)
        try plantSparseFile(at: keybag, size: 1 << 30)
        store.device.relinquishOwnership()
        let reads = ReadMeasuringFileSystem()
        let boot = outcome { try Device(directory: FilePath(deviceDirectory.path), clock: VirtualClock(), configuration: .testing(), fileSystem: reads) }
        switch boot {
        case .success: Issue.record("a 1 GiB keybag booted")
        case .failure(let error): #expect(error.code == .integrityFailure, "\(error)")
        }
        try saved.write(to: keybag)
        try plantSparseFile(at: deviceDirectory.appendingPathComponent("attempts"), size: 1 << 30)
        let clock = VirtualClock()
        let device = try Device(directory: FilePath(deviceDirectory.path), clock: clock, configuration: .testing(), fileSystem: reads)
        // Unreadable: the punitive count, never a reset; the right passcode works once its delay is over.
        expectStoreError(.passcodeAttemptsDelayed) { try device.unlock(passcode: "1234") }
        clock.advance(by: .seconds(2 * 3600))
        try device.unlock(passcode: "1234")
        #expect(try Data(contentsOf: deviceDirectory.appendingPathComponent("attempts")).count < 4096)
        #expect(reads.largest <= 4096, "a whole-file read of \(reads.largest) bytes")
    }

    private func plantSparseFile(at url: URL, size: Int64) throws {
        try? FileManager.default.removeItem(at: url)
        #expect(FileManager.default.createFile(atPath: url.path, contents: Data("x".utf8)))
        let handle = try FileHandle(forWritingTo: url)
        try handle.truncate(atOffset: UInt64(size))
        try handle.close()
    }
}

/// The real file system, on a disk that says it has only `available` bytes free.
struct SmallDiskFileSystem: ForwardingFileSystem {
    let base = PosixFileSystem()
    let available: UInt64

    func availableCapacity(of descriptor: FileDescriptor, path: FilePath) throws(DataProtectionError) -> UInt64? {
        available
    }
}

/// The real file system, remembering the largest whole file it returned.
final class ReadMeasuringFileSystem: ForwardingFileSystem, @unchecked Sendable {
    let base = PosixFileSystem()
    private let state = Locked(0)

    var largest: Int { state.withLock { $0 } }

    func readFile(at path: FilePath, limit: Int) throws(DataProtectionError) -> Data? {
        let data = try base.readFile(at: path, limit: limit)
        state.withLock { $0 = max($0, data?.count ?? 0) }
        return data
    }
}
