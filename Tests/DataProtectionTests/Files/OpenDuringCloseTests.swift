import Foundation
import SystemPackage
import Testing
@testable import DataProtection

/// The last handle on a file closes, and its flush commits through a redo
/// journal, while another thread opens the same file. The opener must wait
/// for the close: opening recovers a leftover journal, and recovering the
/// journal of a flush still in progress would remove it (or, torn, discard
/// it) under the flush, leaving its in-place overwrites unprotected.
@Suite struct OpenDuringCloseTests {
    /// Forwards everything; once armed, the first `fsync` of a journal waits until released.
    final class PausingFileSystem: ForwardingFileSystem, @unchecked Sendable {
        let base = PosixFileSystem()
        private let lock = NSLock()
        private var armed = false
        let paused = DispatchSemaphore(value: 0)
        let resume = DispatchSemaphore(value: 0)

        func arm() { lock.locked { armed = true } }

        func synchronize(_ descriptor: FileDescriptor, path: FilePath) throws(DataProtectionError) {
            let pause = path.string.hasSuffix(FileJournal.suffix) && lock.locked { () -> Bool in
                defer { armed = false }
                return armed
            }
            if pause {
                paused.signal()
                _ = resume.wait(timeout: .now() + 10)
            }
            try base.synchronize(descriptor, path: path)
        }
    }

    /// What the other threads saw.
    final class Outcome: @unchecked Sendable {
        private let lock = NSLock()
        private var values: [String: Result<Data, DataProtectionError>] = [:]
        func set(_ key: String, _ value: Result<Data, DataProtectionError>) { lock.locked { values[key] = value } }
        subscript(key: String) -> Result<Data, DataProtectionError>? { lock.locked { values[key] } }
    }

    static func journals(under root: URL) -> [String] {
        let files = root.appendingPathComponent("files").path
        return ((try? FileManager.default.contentsOfDirectory(atPath: files)) ?? []).filter { $0.hasSuffix(FileJournal.suffix) }
    }

    @Test("a whole-file read waits for the closing flush of the same file, whose journal stays until it is done")
    func openWaitsForClose() throws {
        try withScratchDirectory { root in
            let fileSystem = PausingFileSystem()
            let store = try ScratchStore.unlocked(at: root, on: fileSystem, passcode: "1234")
            let old = Data(repeating: 0, count: 40_000), new = Data(repeating: 1, count: 40_000)
            try store.write(old, to: "/f")
            let handle = try store.openFile(atPath: "/f", mode: .update)
            try handle.write(contentsOf: new, atOffset: 0)  // overwrites committed chunks: a journal at close
            fileSystem.arm()
            let outcome = Outcome()
            let finished = DispatchGroup()
            // Threads of their own: the dispatch pool may not start a second worker while one is blocked.
            finished.enter()
            Thread.detachNewThread {
                outcome.set("close", Result { () throws(DataProtectionError) -> Data in try handle.close(); return Data() })
                finished.leave()
            }
            #expect(fileSystem.paused.wait(timeout: .now() + 10) == .success, "the close reached its journal's fsync")
            finished.enter()
            Thread.detachNewThread {
                outcome.set("read", Result { () throws(DataProtectionError) -> Data in try store.contents(atPath: "/f") })
                finished.leave()
            }
            // Time for the read to open the file (and, were it not waiting, to recover the journal).
            Thread.sleep(forTimeInterval: 0.3)
            #expect(Self.journals(under: root).count == 1, "the closing flush's journal is still there")
            #expect(outcome["read"] == nil, "the read waits for the close")
            fileSystem.resume.signal()
            #expect(finished.wait(timeout: .now() + 10) == .success)
            #expect(outcome["close"] == .success(Data()))
            #expect(outcome["read"] == .success(new))
            #expect(Self.journals(under: root).isEmpty)
            #expect(try store.contents(atPath: "/f") == new)
        }
    }
}
