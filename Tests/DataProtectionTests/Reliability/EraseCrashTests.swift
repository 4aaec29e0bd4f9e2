import Foundation
import SystemPackage
import Testing
@testable import DataProtection

/// `erase` with a store full of files, cut by a power cut at every step: after the
/// restart the store is either untouched (the cut came before the erase began) or
/// erased for good: empty on disk as in a listing, no passcode, and usable.
@Suite("Erase interrupted at every step, with a store")
struct EraseCrashTests {
    static func prepare(_ root: URL, _ fileSystem: CrashingFileSystem) throws -> ProtectedStore {
        let store = try ScratchStore.unlocked(at: root, on: fileSystem, passcode: "1234")
        try store.createDirectory(atPath: "/Documents")
        try store.write(Data("none".utf8), to: "/Documents/plain", protection: .none)
        try store.write(Data("complete".utf8), to: "/Documents/secret", protection: .complete)
        try store.write(patternBytes(40_000, seed: 1), to: "/big")
        return store
    }

    /// The entries of the store's data directory on disk (names encrypted), recursively.
    static func entriesOnDisk(_ root: URL) -> [String] {
        let files = root.appendingPathComponent("files")
        return (FileManager.default.enumerator(atPath: files.path)?.allObjects as? [String] ?? []).sorted()
    }

    @Test("a power cut at every step of an erase: afterwards the old store, or an empty, working one with nothing left on disk",
          arguments: CrashingFileSystem.Mode.deviceCases)
    func eraseCutAtEveryStep(_ mode: CrashingFileSystem.Mode) throws {
        let steps = try withScratchDirectory { root in
            let fileSystem = CrashingFileSystem(mode: mode)
            let store = try Self.prepare(root, fileSystem)
            fileSystem.arm(crashAt: nil)
            try store.device.erase()
            return fileSystem.operations
        }
        #expect(steps >= 5)
        var outcomes: [String: Int] = [:]
        var oldSteps: [Int] = []
        for step in 1...steps {
            try withScratchDirectory { root in
                let fileSystem = CrashingFileSystem(mode: mode)
                let store = try Self.prepare(root, fileSystem)
                fileSystem.arm(crashAt: step)
                #expect(throws: DataProtectionError.self) { try store.device.erase() }
                let restarted = try ScratchStore.restarted(at: root, replacing: store)
                let device = restarted.device
                if device.hasPasscode {
                    outcomes["old", default: 0] += 1
                    oldSteps.append(step)
                    try device.unlock(passcode: "1234")
                    #expect(try restarted.contents(atPath: "/Documents/secret") == Data("complete".utf8), "step \(step)")
                } else {
                    outcomes["erased", default: 0] += 1
                    #expect(try restarted.contentsOfDirectory(atPath: "/").isEmpty, "step \(step)")
                    #expect(Self.entriesOnDisk(root) == [StoreIdentity.fileName, DirectoryMetadata.fileName].sorted(), "step \(step): \(Self.entriesOnDisk(root))")
                    try device.unlock()
                    try restarted.write(Data("after".utf8), to: "/new")
                    #expect(try restarted.contents(atPath: "/new") == Data("after".utf8))
                }
            }
        }
        // The first durable step is the erase's mark (a temporary file, write, fsync, close, rename,
        // directory fsync): cut before it is durable the erase has not begun; once it is, the erase
        // is always finished at the next boot.
        #expect((oldSteps.max() ?? 0) <= 6, "\(outcomes), old at steps \(oldSteps): an erase once begun is finished at the next boot")
        #expect(outcomes["erased", default: 0] >= steps - 6)
    }
}
