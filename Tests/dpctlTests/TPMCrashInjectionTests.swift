import Foundation
import Testing
import TPMBridge

/// Deterministic crash injection into every step of a TPM device's write protocols
/// (`Keys/key-hierarchy.md` §4.4.4, §4.4.3): `dpctl` is killed with SIGKILL exactly at a
/// point (`DPCTL_TEST_TPM_CRASH`) of an attempt-counter write (the file for c+1 written and
/// the TPM counter not advanced; the counter advanced and the verdict not written) or of the
/// keybag write of a passcode change (the new effaceable slot written and the keybag not; the
/// keybag written and the old slot not wiped). After each crash the device opens (the NV
/// counter and the files in step: no `integrityFailure`), the attempt is counted (the count
/// never lowered), and exactly the right passcode opens it.
@Suite("TPM crash injection", .serialized, .enabled(if: SoftwareTPM.isInstalled, "swtpm is not installed (Debian: swtpm swtpm-tools); CI installs it"))
struct TPMCrashInjectionTests {
    /// Runs dpctl with `environment`; whether SIGKILL ended it (the crash point was reached).
    static func runCrashing(_ arguments: [String], environment: [String: String]) throws -> Bool {
        let process = Process()
        process.executableURL = DPCtlRunner.executable
        process.arguments = arguments
        process.environment = environment
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        process.waitUntilExit()
        return process.terminationReason == .uncaughtSignal && process.terminationStatus == SIGKILL
    }

    final class Device {
        let tpm: SoftwareTPM
        let fixture: StoreFixture
        var tcti: [String: String] { ["DPCTL_TPM_TCTI": tpm.tcti] }

        init() throws {
            tpm = try SoftwareTPM()
            fixture = try StoreFixture()
            let created = try fixture.run(["init", "--device-key", "tpm"], passcode: "p0", extra: tcti)
            #expect(created.status == 0, "\(created.standardError)")
            let source = try fixture.localFile("kept.txt", Data("kept\n".utf8))
            #expect(try fixture.run(["put", source.path, "kept.txt", "--class", "complete"], passcode: "p0", extra: tcti).status == 0)
        }

        /// `dpctl status --json`: it must open (the NV counter and the attempt counter in step); the failed attempts.
        func failedAttempts(_ context: String) throws -> Int? {
            let status = try fixture.run(["status", "--json"], passcode: nil, extra: tcti)
            #expect(status.status == 0, "\(context): \(status.standardError)")
            return try? status.json()["failedAttempts"] as? Int
        }

        /// Whether `passcode` reads the class A file.
        func opens(with passcode: String, _ context: String) throws -> Bool {
            let read = try fixture.run(["cat", "kept.txt"], passcode: passcode, extra: tcti)
            if read.status == 0 {
                #expect(read.standardOutput == "kept\n", "\(context)")
                return true
            }
            #expect(read.standardError.contains("incorrectPasscode"), "\(context): \(read.standardError)")
            return false
        }
    }

    @Test("a crash at each step of an attempt-counter write, right or wrong passcode: counted, in step, the right passcode opens")
    func attemptCounterWrites() throws {
        let device = try Device()
        for point in ["attemptsWritten", "counterAdvanced"] {
            for right in [true, false] {
                let context = "\(point), \(right ? "right" : "wrong") passcode"
                let before = try #require(try device.failedAttempts(context))
                var environment = device.fixture.environment(passcode: right ? "p0" : "wrong", extra: device.tcti)
                environment["DPCTL_TEST_TPM_CRASH"] = point
                #expect(try Self.runCrashing(["unlock"], environment: environment), "\(context): the crash point was not reached")
                // The attempt was counted before the verdict: the crash never refunds it.
                #expect(try device.failedAttempts(context) == before + 1, "\(context)")
                #expect(try !device.opens(with: "p1", context))
                #expect(try device.opens(with: "p0", context))
                #expect(try device.failedAttempts(context) == 0, "\(context)")
            }
        }
    }

    @Test("a crash at each step of a passcode change: in step, and exactly one passcode (the one the crash point implies) opens")
    func passcodeChangeWrites() throws {
        let device = try Device()
        var current = "p0"
        // The old passcode's check (an attempt-counter write), then the rotation: new slot, keybag, old slot wiped.
        let points: [(String, changed: Bool, counted: Int)] = [
            ("attemptsWritten", false, 1), ("counterAdvanced", false, 1), ("rotationSlotWritten", false, 0), ("keybagWritten", true, 0),
        ]
        for (index, (point, changed, counted)) in points.enumerated() {
            let next = "n\(index)"
            var environment = device.fixture.environment(passcode: current, extra: device.tcti)
            environment["DPCTL_NEW_PASSCODE"] = next
            environment["DPCTL_TEST_TPM_CRASH"] = point
            #expect(try Self.runCrashing(["passcode", "change"], environment: environment), "\(point): the crash point was not reached")
            // Killed inside the old passcode's check, the attempt stays counted; after it, the check's verdict (0) stands.
            #expect(try device.failedAttempts(point) == counted, "\(point)")
            let right = changed ? next : current
            let wrong = changed ? current : next
            #expect(try !device.opens(with: wrong, "\(point), \(wrong)"))
            #expect(try device.opens(with: right, "\(point), \(right)"))
            #expect(try device.failedAttempts(point) == 0)
            current = right
            // A change after the crash works, and leaves one passcode.
            let changedAgain = try device.fixture.run(["passcode", "change"], passcode: current,
                                                      extra: device.tcti.merging(["DPCTL_NEW_PASSCODE": "m\(index)"]) { $1 })
            #expect(changedAgain.status == 0, "\(point): \(changedAgain.standardError)")
            #expect(try !device.opens(with: current, point))
            current = "m\(index)"
            #expect(try device.opens(with: current, point))
        }
    }
}
