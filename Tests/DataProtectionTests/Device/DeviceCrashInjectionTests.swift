import Foundation
import SystemPackage
import Testing
@testable import DataProtection

/// Crash injection beyond passcode changes (see `PasscodeCrashTests`): failed
/// and right attempts, the failure that reaches the erase limit, `erase` and
/// device creation, each interrupted at every one of its file-system operations,
/// with and without loss of unsynced data. Afterwards the device must boot from
/// its files with the real file system (semantics.md: "a crash ... no file is
/// ever left unreadable"; failed attempts are counted across crashes).
@Suite("Device crash injection")
struct DeviceCrashInjectionTests {
    /// A device in `root` on `fileSystem`, unlocked, with `passcode` (if any) and `failures` counted failures.
    static func prepare(root: URL, passcode: String?, failures: Int, configuration: DeviceConfiguration = .testing(),
                        fileSystem: any FileSystem) throws -> DeviceFixture {
        let fixture = try DeviceFixture(root: root, configuration: configuration, passcode: passcode, fileSystem: fileSystem)
        if passcode == nil { try fixture.device.unlock() }
        fixture.fail(failures)
        return fixture
    }

    /// The temporary files left in the device directory.
    static func debris(in fixture: DeviceFixture) throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: fixture.directory.path)
            .filter { $0.hasPrefix(AtomicFileWriter.temporaryPrefix) }
    }

    /// How many mutating file-system operations `operation` performs on a device prepared by `setUp`.
    static func countSteps(mode: CrashingFileSystem.Mode, setUp: (URL, CrashingFileSystem) throws -> DeviceFixture,
                           operation: (DeviceFixture) throws -> Void) throws -> Int {
        try withScratchDirectory { root in
            let fileSystem = CrashingFileSystem(mode: mode)
            let fixture = try setUp(root, fileSystem)
            fileSystem.arm(crashAt: nil)
            do { try operation(fixture) } catch let error as DataProtectionError where error.code != .ioFailure {}
            return fileSystem.operations
        }
    }

    @Test("a right attempt interrupted at any step: the device boots and the right passcode still unlocks",
          arguments: CrashingFileSystem.Mode.deviceCases)
    func rightAttempt(mode: CrashingFileSystem.Mode) throws {
        let setUp = { (root: URL, fileSystem: CrashingFileSystem) -> DeviceFixture in
            try Self.prepare(root: root, passcode: "right", failures: 2, fileSystem: fileSystem)
        }
        let attempt = { (fixture: DeviceFixture) in
            try fixture.device.lock()
            try fixture.device.unlock(passcode: "right")
        }
        let steps = try Self.countSteps(mode: mode, setUp: setUp, operation: attempt)
        #expect(steps >= 6)

        for step in 1...steps {
            try withScratchDirectory { root in
                let fileSystem = CrashingFileSystem(mode: mode)
                let fixture = try setUp(root, fileSystem)
                let original = fixture.fingerprints()
                fileSystem.arm(crashAt: step)
                #expect(throws: DataProtectionError.self) { try attempt(fixture) }
                try fixture.reopen()
                #expect(try Self.debris(in: fixture).isEmpty, "step \(step)")
                let possible: Set<Int> = [0, 2, 3, PasscodePolicy.longestDelayFailures]
                #expect(possible.contains(fixture.device.failedPasscodeAttempts), "step \(step)")
                fixture.waitForNextAttempt()
                try fixture.device.unlock(passcode: "right")
                #expect(fixture.fingerprints() == original, "step \(step)")
            }
        }
    }

    @Test("the failure that reaches the erase limit, interrupted at any step: no extra guess at the old data",
          arguments: CrashingFileSystem.Mode.deviceCases)
    func eraseAfterFailures(mode: CrashingFileSystem.Mode) throws {
        let limit = 3
        let configuration = DeviceConfiguration.testing(eraseAfter: limit)
        let setUp = { (root: URL, fileSystem: CrashingFileSystem) -> DeviceFixture in
            try Self.prepare(root: root, passcode: "right", failures: limit - 1,
                             configuration: configuration, fileSystem: fileSystem)
        }
        let attempt = { (fixture: DeviceFixture) in
            try fixture.device.lock()
            try fixture.device.unlock(passcode: "wrong")
        }
        let steps = try Self.countSteps(mode: mode, setUp: setUp, operation: attempt)
        #expect(steps >= 20, "the erase wrote too little")

        for step in 1...steps {
            try withScratchDirectory { root in
                let fileSystem = CrashingFileSystem(mode: mode)
                let fixture = try setUp(root, fileSystem)
                let original = fixture.fingerprints()
                fileSystem.arm(crashAt: step)
                #expect(throws: DataProtectionError.self) { try attempt(fixture) }

                try fixture.reopen()
                #expect(try Self.debris(in: fixture).isEmpty, "step \(step)")
                let device = fixture.device
                if !device.hasPasscode {
                    // The erase went through.
                    try EraseTests.expectFresh(fixture, comparedWith: original)
                } else if device.failedPasscodeAttempts >= limit {
                    // The limit was reached on disk but the erase did not happen: the
                    // next attempt, even with the right passcode, must finish it.
                    fixture.waitForNextAttempt()
                    expectError(.deviceErased, "step \(step): the right passcode unlocked after the limit was reached") {
                        try device.unlock(passcode: "right")
                    }
                } else {
                    // The failure was not counted: the old device, intact.
                    #expect(device.failedPasscodeAttempts == limit - 1, "step \(step)")
                    try device.unlock(passcode: "right")
                    #expect(fixture.fingerprints() == original, "step \(step)")
                }
            }
        }
    }

    @Test("an erase interrupted at any step leaves the old device or a fresh one, never one that cannot boot",
          arguments: CrashingFileSystem.Mode.deviceCases)
    func erase(mode: CrashingFileSystem.Mode) throws {
        let setUp = { (root: URL, fileSystem: CrashingFileSystem) in
            try Self.prepare(root: root, passcode: "right", failures: 0, fileSystem: fileSystem)
        }
        let steps = try Self.countSteps(mode: mode, setUp: setUp) { try $0.device.erase() }
        #expect(steps >= 20)
        var outcomes: Set<String> = []
        for step in 1...steps {
            try withScratchDirectory { root in
                let fileSystem = CrashingFileSystem(mode: mode)
                let fixture = try setUp(root, fileSystem)
                let original = fixture.fingerprints()
                fileSystem.arm(crashAt: step)
                #expect(throws: DataProtectionError.self) { try fixture.device.erase() }

                try fixture.reopen()
                #expect(try Self.debris(in: fixture).isEmpty, "step \(step)")
                if fixture.device.hasPasscode {
                    outcomes.insert("old")
                    fixture.waitForNextAttempt()
                    try fixture.device.unlock(passcode: "right")
                    #expect(fixture.fingerprints() == original, "step \(step)")
                } else {
                    outcomes.insert("fresh")
                    try EraseTests.expectFresh(fixture, comparedWith: original)
                }
            }
        }
        #expect(outcomes.contains("fresh"), "no interrupted erase ever completed at boot")
    }

    @Test("creating a device interrupted at any step: the next boot makes a working fresh device",
          arguments: CrashingFileSystem.Mode.deviceCases)
    func creation(mode: CrashingFileSystem.Mode) throws {
        let steps = try withScratchDirectory { root in
            let fileSystem = CrashingFileSystem(mode: mode)
            _ = try DeviceFixture(root: root, configuration: .testing(), passcode: nil, fileSystem: fileSystem)
            return fileSystem.operations
        }
        #expect(steps >= 24)
        for step in 1...steps {
            try withScratchDirectory { root in
                let fileSystem = CrashingFileSystem(mode: mode)
                fileSystem.arm(crashAt: step)
                #expect(throws: DataProtectionError.self) {
                    _ = try DeviceFixture(root: root, configuration: .testing(), passcode: nil, fileSystem: fileSystem)
                }
                let device = try Device(directory: root.appendingPathComponent("device"), clock: VirtualClock(),
                                        configuration: .testing())
                #expect(device.state == .booted)
                #expect(!device.hasPasscode)
                try device.unlock()
                #expect(device.isProtectedDataAvailable)
                let names = try FileManager.default.contentsOfDirectory(atPath: root.appendingPathComponent("device").path)
                #expect(names.sorted() == ["attempts", "effaceable", "keybag", "lock", "uid"], "step \(step)")
            }
        }
    }
}
