import Foundation
import Testing
@testable import DataProtection

/// Regression (found by the SIGKILL harness, seed 20261121 round 1647): a growth interrupted
/// after its records were written leaves them past the committed length; a later commit of a
/// shorter growth in the same allocation brought the file to rest with those stale bytes
/// after it, so the new header failed its size check and the reader fell back to the older
/// slot, whose records had been overwritten: the acknowledged content was unreadable.
@Suite("Interrupted growth, then a shorter commit")
struct InterruptedGrowthTests {
    /// `throughJournal`: the shorter growth also rewrites a committed chunk; `secondLength`:
    /// 21,110 bytes make a growth small enough to go through the journal whole (journaled
    /// growth, §8.2), 300,000 one whose records are written in place.
    @Test("a crash after a growth's records, then a shorter growth: the file reads as written",
          arguments: [(throughJournal: false, secondLength: 300_000), (throughJournal: true, secondLength: 300_000),
                      (throughJournal: false, secondLength: 21_110)])
    func shorterGrowthAfterCrash(_ throughJournal: Bool, secondLength: Int) throws {
        let root = IOFaultTests.scratch()
        defer { try? FileManager.default.removeItem(at: root) }
        let crashing = CrashingFileSystem(mode: .keepEverything)
        let store = try ScratchStore.unlocked(at: root, on: crashing, passcode: "1234")
        var content = patternBytes(21_696, seed: 1)
        try store.write(content, to: "/f")

        // A growth to 421,696 bytes (too many records for a journaled growth), cut just after its
        // records are written (alloc header, fsync, records).
        let handle = try store.openFile(atPath: "/f")
        try handle.write(contentsOf: patternBytes(400_000, seed: 2), atOffset: 21_696)
        crashing.arm(crashAt: 4)
        #expect(throws: DataProtectionError.self) { try handle.synchronize() }
        #expect(crashing.hasCrashed)

        // Restart; a shorter growth (to 28,615 + `secondLength` bytes), that may also rewrite chunk 1.
        let restarted = try ScratchStore.restarted(at: root, replacing: store)
        let device = restarted.device
        try device.unlock(passcode: "1234")
        #expect(try restarted.contents(atPath: "/f") == content, "the interrupted growth is invisible")
        let again = try restarted.openFile(atPath: "/f")
        let first = patternBytes(4_337, seed: 3), second = patternBytes(secondLength, seed: 4)
        if throughJournal {
            try again.write(contentsOf: first, atOffset: 17_127)
            content.replaceSubrange(17_127..<17_127 + first.count, with: first)
        }
        try again.write(contentsOf: second, atOffset: 28_615)
        content.append(Data(count: 28_615 - content.count))
        content.append(second)
        try again.close()
        #expect(try restarted.contents(atPath: "/f") == content)

        // And after another restart.
        try device.reboot()
        try device.unlock(passcode: "1234")
        let third = try ProtectedStore(directory: root.appendingPathComponent("files"), device: device)
        #expect(try third.contents(atPath: "/f") == content, "the acknowledged content after a restart")
        withExtendedLifetime((store, handle)) {}
    }
}
