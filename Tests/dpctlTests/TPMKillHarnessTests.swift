import Foundation
import Testing
import TPMBridge

/// A kill harness over a TPM device (issue 34): `dpctl unlock` and `dpctl passcode change`
/// killed with SIGKILL at random instants, against swtpm (no resource manager: every kill
/// leaves the killed process's transient objects in the TPM). After every kill the device
/// opens (the NV counter and the attempt counter file never out of step: no
/// `integrityFailure`), exactly one of the old and new passcodes unlocks it (an
/// acknowledged change is never lost), and nothing else is damaged.
@Suite("TPM kill harness", .serialized, .enabled(if: SoftwareTPM.isInstalled, "swtpm is not installed (Debian: swtpm swtpm-tools); CI installs it"))
struct TPMKillHarnessTests {
    /// Runs dpctl with `environment`, killing it after `delay` unless it finished first, or
    /// (`paused`) as soon as it creates that file, pausing inside the crash window; its exit
    /// status (`nil`: killed before it finished).
    static func runKilled(_ arguments: [String], environment: [String: String], after delay: Duration, paused: URL? = nil) throws -> Int32? {
        let process = Process()
        process.executableURL = DPCtlRunner.executable
        process.arguments = arguments
        process.environment = environment
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        let deadline = ContinuousClock.now + delay
        while process.isRunning, ContinuousClock.now < deadline {
            if let paused, FileManager.default.fileExists(atPath: paused.path) { break }
            usleep(500)
        }
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            return nil
        }
        process.waitUntilExit()
        return process.terminationStatus
    }

    @Test("SIGKILL during TPM unlocks and passcode changes: the device always opens, with exactly one working passcode")
    func killDuringUnlockAndChange() throws {
        let tpm = try SoftwareTPM()
        let fixture = try StoreFixture()
        let tcti = ["DPCTL_TPM_TCTI": tpm.tcti]
        let created = try fixture.run(["init", "--device-key", "tpm"], passcode: "p0", extra: tcti)
        #expect(created.status == 0, "\(created.standardError)")
        let source = try fixture.localFile("kept.txt", Data("kept\n".utf8))
        #expect(try fixture.run(["put", source.path, "kept.txt", "--class", "complete"], passcode: "p0", extra: tcti).status == 0)

        var random = SystemRandomNumberGenerator()
        var current = "p0"
        var kills = 0
        var killedInWindow = 0
        for round in 1...30 {
            let next = "p\(round)"
            let changing = round % 2 == 0
            var environment = fixture.environment(passcode: current, extra: tcti)
            if changing { environment["DPCTL_NEW_PASSCODE"] = next }
            // An unlock takes about 0.2 s here (Argon2id at the calibrated cost), a change about 1.2 s (calibration):
            // the kill lands anywhere in it, or after.
            var delay = Duration.milliseconds(Int.random(in: 5...(changing ? 1300 : 260), using: &random))
            // Every fifth round the kill lands inside the narrow window: the attempt counter file for c+1 written,
            // the TPM counter not advanced yet (dpctl pauses there, test hook, and says so with a file).
            let marker = round % 5 == 0 ? fixture.directory.appendingPathComponent("paused-\(round)") : nil
            if let marker {
                environment["DPCTL_TEST_TPM_PAUSE"] = "attemptsWritten"
                environment["DPCTL_TEST_TPM_PAUSE_FILE"] = marker.path
                delay = .seconds(20)
            }
            let status = try Self.runKilled(changing ? ["passcode", "change"] : ["unlock"], environment: environment, after: delay,
                                            paused: marker)
            if status == nil { kills += 1 }
            if status == nil, let marker, FileManager.default.fileExists(atPath: marker.path) { killedInWindow += 1 }
            if let status { #expect(status == 0, "round \(round): exit \(status)") }

            // The device opens: status reads the attempt counter under the NV counter.
            let opened = try fixture.run(["status", "--json"], passcode: nil, extra: tcti)
            #expect(opened.status == 0, "round \(round): \(opened.standardError)")
            // Exactly one passcode works: the new one if the change was acknowledged, else either.
            let candidates = changing && status == 0 ? [next] : changing ? [current, next] : [current]
            var working: [String] = []
            for candidate in candidates {
                let read = try fixture.run(["cat", "kept.txt"], passcode: candidate, extra: tcti)
                if read.status == 0 {
                    #expect(read.standardOutput == "kept\n")
                    working.append(candidate)
                    break
                }
                #expect(read.standardError.contains("incorrectPasscode"), "round \(round): \(read.standardError)")
            }
            #expect(working.count == 1, "round \(round): no passcode of \(candidates) works")
            guard let right = working.first else { break }
            current = right
        }
        #expect(kills > 0, "no run was killed: the delays are too long for this machine")
        #expect(killedInWindow == 6, "a SIGKILL landed between the attempt counter's file and the TPM counter's increment \(killedInWindow) times")
    }
}
