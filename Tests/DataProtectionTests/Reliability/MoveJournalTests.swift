import Foundation
import Testing
@testable import DataProtection

/// A file whose last commit stands on its journal (chained: the header not yet written) and
/// whose checkpoint was cut after its in-place overwrites were written, then moved (the
/// journal is renamed after the file), with the process dying between the two renames.
@Suite("A move interrupted between a file and its journal")
struct MoveJournalTests {
    @Test("the moved file still reads as a committed state")
    func moveBetweenRenames() throws {
        let root = IOFaultTests.scratch()
        defer { try? FileManager.default.removeItem(at: root) }
        let crashing = CrashingFileSystem(mode: .keepEverything)
        let store = try ScratchStore.unlocked(at: root, on: crashing, passcode: "1234")
        let old = patternBytes(20_000, seed: 1)
        try store.write(old, to: "/f")
        // Overwrite chunk 1 (the short last chunk grows: its record length changes) and chunk 0.
        let handle = try store.openFile(atPath: "/f")
        try handle.write(contentsOf: patternBytes(30_000, seed: 2), atOffset: 100)
        try handle.synchronize()
        crashing.arm(crashAt: nil)
        try handle.close()
        // The checkpoint at close: the overwrites of chunks 0 and 1 in place (one run), then the
        // header (cut there), then its `fsync`.
        let steps = crashing.log
        let cut = steps.firstIndex { !$0.contains("write") } ?? 0
        #expect(cut >= 2 && steps.prefix(cut).allSatisfy { $0.contains("write") }, "the checkpoint's calls: \(steps)")
        var new = old
        new.replaceSubrange(100..<20_000, with: patternBytes(30_000, seed: 2).prefix(19_900))
        new.append(patternBytes(30_000, seed: 2).suffix(10_100))
        var crashes = 0
        for moveStep in 1...12 {
            let root2 = IOFaultTests.scratch()
            defer { try? FileManager.default.removeItem(at: root2) }
            let crashing2 = CrashingFileSystem(mode: .keepEverything)
            let store2 = try ScratchStore.unlocked(at: root2, on: crashing2, passcode: "1234")
            try store2.write(old, to: "/f")
            let handle2 = try store2.openFile(atPath: "/f")
            try handle2.write(contentsOf: patternBytes(30_000, seed: 2), atOffset: 100)
            try handle2.synchronize()
            crashing2.arm(crashAt: cut)
            #expect(throws: DataProtectionError.self) { try handle2.close() }
            #expect(crashing2.hasCrashed)

            // Restart, and move the file (not opened: its journal is not replayed), dying at step `moveStep`.
            let crashing3 = CrashingFileSystem(mode: .keepEverything)
            let store3 = try ScratchStore.restarted(at: root2, replacing: store2, on: crashing3)
            crashing3.arm(crashAt: moveStep)
            _ = outcome { try store3.moveItem(atPath: "/f", toPath: "/g") }
            guard crashing3.hasCrashed else { break }
            crashes += 1

            // Restart again and read whichever name the file has.
            let store4 = try ScratchStore.restarted(at: root2, replacing: store3)
            try store4.device.unlock(passcode: "1234")
            let names = try store4.contentsOfDirectory(atPath: "/")
            #expect(names == ["f"] || names == ["g"], "step \(moveStep): \(names)")
            let read = outcome { try store4.contents(atPath: "/" + (names.first ?? "f")) }
            #expect(read == .success(old) || read == .success(new),
                    "move cut at step \(moveStep): the file reads as \(read.errorCode.map { "\($0)" } ?? "a mixture")")
            withExtendedLifetime((store2, handle2, store3)) {}
        }
        #expect(crashes >= 2, "the move was cut at each of its steps")
        withExtendedLifetime((store, handle)) {}
    }
}
