import Foundation
import Testing
@testable import DataProtection

/// A passcode change (or a failed attempt) interrupted at each of its file-system
/// operations in turn (create, write, fsync, close, rename, directory fsync), with and
/// without loss of unsynced data: the device must boot from its files afterwards,
/// unlock with the old or the new passcode, and have lost no class key.
@Suite("Passcode changes interrupted by a crash")
struct PasscodeCrashTests {
    enum Operation: String, CaseIterable, Sendable {
        case set, change, remove

        var before: String? { self == .set ? nil : "old" }
        var after: String? { self == .remove ? nil : "new" }

        func run(on device: Device) throws(DataProtectionError) {
            switch self {
            case .set: try device.setPasscode("new")
            case .change: try device.changePasscode(from: "old", to: "new")
            case .remove: try device.removePasscode("old")
            }
        }
    }

    /// A device with `operation.before` set, unlocked, on `fileSystem`.
    static func prepare(_ root: URL, _ operation: Operation, _ fileSystem: CrashingFileSystem) throws -> DeviceFixture {
        let fixture = try DeviceFixture(root: root, configuration: .testing(), passcode: operation.before, fileSystem: fileSystem)
        if operation.before == nil { try fixture.device.unlock() }
        return fixture
    }

    /// How many file-system operations `operation` performs.
    static func steps(_ operation: Operation, _ mode: CrashingFileSystem.Mode) throws -> Int {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("dp-crash-count-\(UUID())")
        defer { try? FileManager.default.removeItem(at: root) }
        let fileSystem = CrashingFileSystem(mode: mode)
        let fixture = try prepare(root, operation, fileSystem)
        fileSystem.arm(crashAt: nil)
        let before = fileSystem.operations
        try operation.run(on: fixture.device)
        return fileSystem.operations - before
    }

    @Test("crash at every step of set, change and remove: old or new passcode unlocks, no class key lost",
          arguments: Operation.allCases, CrashingFileSystem.Mode.allCases)
    func crashDuringChange(_ operation: Operation, mode: CrashingFileSystem.Mode) throws {
        let total = try Self.steps(operation, mode)
        // The attempt counter (change, remove) and the keybag: at least one atomic write of 6 operations.
        #expect(total >= 6, "the operation wrote nothing: the loop below would test nothing")
        var outcomes: Set<String> = []
        for step in 1...max(total, 1) {
            let root = FileManager.default.temporaryDirectory.appendingPathComponent("dp-crash-\(UUID())")
            defer { try? FileManager.default.removeItem(at: root) }
            let fileSystem = CrashingFileSystem(mode: mode)
            let fixture = try Self.prepare(root, operation, fileSystem)
            let original = fixture.fingerprints()
            fileSystem.arm(crashAt: step)
            var crashed = false
            do {
                try operation.run(on: fixture.device)
            } catch {
                crashed = CrashingFileSystem.isCrash(error)
            }
            #expect(crashed, "step \(step) of \(total) did not crash")

            // Restart from the files, with the real file system.
            let device = try fixture.reopen()
            let debris = try FileManager.default.contentsOfDirectory(atPath: fixture.directory.path)
                .filter { $0.hasPrefix(AtomicFileWriter.temporaryPrefix) }
            #expect(debris.isEmpty, "step \(step): \(debris)")
            var unlockedWith: [String] = []
            for candidate in [operation.before, operation.after] {
                fixture.waitForNextAttempt()
                do {
                    try device.unlock(passcode: candidate)
                    unlockedWith.append(candidate ?? "none")
                    #expect(fixture.fingerprints() == original, "step \(step): a class key was lost or replaced")
                    try device.lock()
                } catch {
                    #expect(error.code == .incorrectPasscode, "step \(step): \(error)")
                }
            }
            #expect(unlockedWith.count == 1, "step \(step): unlocked with \(unlockedWith)")
            outcomes.formUnion(unlockedWith)
        }
        // Early crashes keep the old passcode; the last step (directory fsync) comes after the rename.
        #expect(outcomes.contains(operation.before ?? "none"))
        if mode == .keepEverything { #expect(outcomes.contains(operation.after ?? "none")) }
    }

    @Test("crash at every step of a failed attempt: the device boots, the count never goes down",
          arguments: CrashingFileSystem.Mode.allCases)
    func crashDuringFailedAttempt(mode: CrashingFileSystem.Mode) throws {
        for step in 1...12 {
            let root = FileManager.default.temporaryDirectory.appendingPathComponent("dp-crash-attempt-\(UUID())")
            defer { try? FileManager.default.removeItem(at: root) }
            let fileSystem = CrashingFileSystem(mode: mode)
            let fixture = try DeviceFixture(root: root, configuration: .testing(), passcode: "right", fileSystem: fileSystem)
            fixture.fail(2)
            let original = fixture.fingerprints()
            try fixture.device.lock()
            fileSystem.arm(crashAt: step)
            do { try fixture.device.unlock(passcode: "wrong") } catch {}
            let device = try fixture.reopen()
            let failures = device.failedPasscodeAttempts
            #expect([2, 3, PasscodePolicy.longestDelayFailures].contains(failures), "step \(step): \(failures)")
            fixture.waitForNextAttempt()
            try device.unlock(passcode: "right")
            #expect(device.failedPasscodeAttempts == 0)
            #expect(fixture.fingerprints() == original, "step \(step)")
        }
    }
}
