import Foundation
import SodiumBridge
import SystemPackage
import Testing
@testable import DataProtection

/// A handle follows its file, not its path (`semantics.md`, "Handles, visibility,
/// durability"): after `rm` (or a `put` over it) it works on the unlinked file and writes
/// nothing back to any path; while the file is renamed, none of its flushes runs, so its
/// journal is never left under a name the file has left.
@Suite("Handles and the place of their file")
struct HandlePlaceTests {
    static let passcode = "2580"

    @Test("a removed file's handle, its directory removed too, touches no path: writes, sync, truncate, the lock's flush, close")
    func removedFileTouchesNoPath() throws {
        let fileSystem = PathRecordingFileSystem()
        let root = IOFaultTests.scratch()
        defer { try? FileManager.default.removeItem(at: root) }
        let store = try ScratchStore.unlocked(at: root, on: fileSystem, passcode: Self.passcode)
        try store.createDirectory(atPath: "d")
        let handle = try store.openFile(atPath: "d/f", create: true, protection: .complete)
        var expected = patternBytes(40_000, seed: 7)
        try handle.write(contentsOf: expected)
        try handle.synchronize()
        try store.removeItem(atPath: "d/f")
        try store.removeItem(atPath: "d")

        fileSystem.startRecording()
        // Overwrites of committed records (a journal, for a file that has a place), growth, a shrink.
        let patch = patternBytes(20_000, seed: 8)
        try handle.write(contentsOf: patch, atOffset: 100)
        expected.replaceSubrange(100..<20_100, with: patch)
        try handle.synchronize()
        try handle.write(contentsOf: patch, atOffset: 40_000)
        expected.append(patch)
        try handle.truncate(atOffset: 50_000)
        expected = expected.prefix(50_000)
        try handle.write(contentsOf: Data("tail".utf8), atOffset: 10)
        expected.replaceSubrange(10..<14, with: Data("tail".utf8))
        try store.device.lock()  // the discard flush
        try store.device.unlock(passcode: Self.passcode)
        try handle.seek(toOffset: 0)
        #expect(try handle.readToEnd() == expected)
        try handle.close()
        let calls = fileSystem.stopRecording()
        let files = root.appendingPathComponent("files").path
        #expect(calls.filter { $0.path.hasPrefix(files) } == [], "calls at paths in the store after the file was removed")
        #expect(try store.contentsOfDirectory(atPath: "/") == [])
        #expect(try FileManager.default.contentsOfDirectory(atPath: files).filter { !$0.hasPrefix(".") && $0 != "dpdir" } == [])
    }

    @Test("a handle on a file replaced by a write keeps the old file and never writes at the new file's path")
    func replacedFileKeepsItsHandle() throws {
        let fileSystem = PathRecordingFileSystem()
        let root = IOFaultTests.scratch()
        defer { try? FileManager.default.removeItem(at: root) }
        let store = try ScratchStore.unlocked(at: root, on: fileSystem, passcode: Self.passcode)
        let old = patternBytes(50_000, seed: 1), new = patternBytes(30_000, seed: 2)
        try store.write(old, to: "a", protection: .complete)
        let handle = try store.openFile(atPath: "a")
        try store.write(new, to: "a")

        fileSystem.startRecording()
        try handle.write(contentsOf: Data(repeating: 0x41, count: 20_000), atOffset: 0)
        try handle.synchronize()
        #expect(try handle.read(atOffset: 19_999, upToCount: 2) == Data([0x41, old[20_000]]))
        try handle.close()
        let calls = fileSystem.stopRecording()
        #expect(calls.filter { $0.path.hasPrefix(root.appendingPathComponent("files").path) } == [])
        #expect(try store.contents(atPath: "a") == new)
        try store.device.crash()
        let restarted = try ScratchStore.restarted(at: root, replacing: store)
        try restarted.device.unlock(passcode: Self.passcode)
        #expect(try restarted.contents(atPath: "a") == new)
    }

    @Test("moves racing flushes of the same open file: the journal is always beside its file", .timeLimit(.minutes(2)))
    func moveRacingFlush() throws {
        // Removing a journal is made slow (as on a busy disk), which widens the window between a
        // flush choosing its journal's path and creating the journal there.
        let fileSystem = PathRecordingFileSystem(journalRemovalDelay: 0.000_5)
        let root = IOFaultTests.scratch()
        defer { try? FileManager.default.removeItem(at: root) }
        let store = try ScratchStore.unlocked(at: root, on: fileSystem, passcode: Self.passcode)
        try store.write(patternBytes(100_000, seed: 3), to: "x/a", protection: .complete)
        let handle = try store.openFile(atPath: "x/a")
        let rounds = 200
        let failures = Locked<[String]>([])
        let done = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            for round in 0..<rounds {
                do {
                    // Overwrites committed records: every sync writes a journal.
                    try handle.write(contentsOf: patternBytes(40_000, seed: UInt64(round)), atOffset: 1_000)
                    try handle.synchronize()
                } catch {
                    failures.withLock { $0.append("flush \(round): \(error)") }
                }
            }
            done.signal()
        }
        for round in 0..<rounds {
            do {
                if round % 2 == 0 {
                    try store.moveItem(atPath: "x/a", toPath: "x/b")
                    try store.moveItem(atPath: "x/b", toPath: "x/a")
                } else {
                    try store.moveItem(atPath: "x", toPath: "y")
                    try store.moveItem(atPath: "y", toPath: "x")
                }
            } catch {
                failures.withLock { $0.append("move \(round): \(error)") }
            }
        }
        done.wait()
        try handle.close()
        #expect(failures.withLock { $0 } == [])
        #expect(fileSystem.strayJournals == [], "journals created where their file was not")
        #expect(try store.contents(atPath: "x/a").prefix(41_000).suffix(40_000) == patternBytes(40_000, seed: UInt64(rounds - 1)))
    }
}

/// The real file system, recording the calls that name a path (not those through an open
/// descriptor, but their `fsync`s too) while asked to, and every journal created where no
/// file is beside it.
final class PathRecordingFileSystem: ForwardingFileSystem, @unchecked Sendable {
    struct Call: Equatable, CustomStringConvertible {
        var name: String
        var path: String
        var description: String { "\(name) \(path)" }
    }

    let base = PosixFileSystem()
    private let journalRemovalDelay: TimeInterval
    private let state = Locked<(recording: Bool, calls: [Call], strays: [String])>((false, [], []))

    init(journalRemovalDelay: TimeInterval = 0) {
        self.journalRemovalDelay = journalRemovalDelay
    }

    func startRecording() { state.withLock { $0.recording = true; $0.calls = [] } }

    func stopRecording() -> [Call] {
        state.withLock { state in
            state.recording = false
            return state.calls
        }
    }

    /// Journals created at a path whose data file did not exist at that instant.
    var strayJournals: [String] { state.withLock { $0.strays } }

    private func record(_ name: String, _ path: FilePath) {
        state.withLock { state in
            if state.recording { state.calls.append(Call(name: name, path: path.string)) }
        }
    }

    private static func isJournal(_ path: FilePath) -> Bool { path.string.hasSuffix(FileJournal.suffix) }

    func readFile(at path: FilePath, limit: Int) throws(DataProtectionError) -> Data? {
        record("read", path)
        return try base.readFile(at: path, limit: limit)
    }

    func createFile(at path: FilePath) throws(DataProtectionError) -> FileDescriptor {
        record("create", path)
        if Self.isJournal(path) {
            let data = FilePath(String(path.string.dropLast(FileJournal.suffix.count)))
            if (try? base.status(at: data)) == nil || (try? base.status(at: data)) == .some(nil) {
                state.withLock { $0.strays.append(path.string) }
            }
        }
        return try base.createFile(at: path)
    }

    func synchronize(_ descriptor: FileDescriptor, path: FilePath) throws(DataProtectionError) {
        record("fsync", path)
        try base.synchronize(descriptor, path: path)
    }

    func rename(_ source: FilePath, to destination: FilePath) throws(DataProtectionError) {
        record("rename", source)
        try base.rename(source, to: destination)
    }

    func synchronizeDirectory(at path: FilePath) throws(DataProtectionError) {
        record("fsync-dir", path)
        try base.synchronizeDirectory(at: path)
    }

    func removeFile(at path: FilePath) throws(DataProtectionError) {
        record("unlink", path)
        if Self.isJournal(path), journalRemovalDelay > 0 { Thread.sleep(forTimeInterval: journalRemovalDelay) }
        try base.removeFile(at: path)
    }

    func createDirectory(at path: FilePath) throws(DataProtectionError) {
        record("mkdir", path)
        try base.createDirectory(at: path)
    }

    func openDataFile(at path: FilePath, create: Bool) throws(DataProtectionError) -> FileDescriptor {
        record("open", path)
        return try base.openDataFile(at: path, create: create)
    }

    func status(at path: FilePath) throws(DataProtectionError) -> FileStatus? {
        record("stat", path)
        return try base.status(at: path)
    }
}
