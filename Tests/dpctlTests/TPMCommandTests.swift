import Foundation
import Testing
import TPMBridge

/// `dpctl init --device-key tpm` on the real binary, against swtpm: the device directory
/// records the choice, `status` shows it (locally and through the agent), and an
/// unreachable TPM is `ioFailure` (exit 24) naming `DPCTL_TPM_TCTI`.
@Suite("dpctl with a TPM device key", .serialized, .enabled(if: SoftwareTPM.isInstalled, "swtpm is not installed (Debian: swtpm swtpm-tools); CI installs it"))
struct TPMCommandTests {
    @Test("init --device-key tpm, put, cat, status --json, then the agent serves the same device")
    func createAndServe() throws {
        let tpm = try SoftwareTPM()
        let fixture = try StoreFixture()
        let environment = ["DPCTL_TPM_TCTI": tpm.tcti]
        let created = try fixture.run(["init", "--device-key", "tpm", "--json"], extra: environment)
        #expect(created.status == 0, "\(created.standardError)")
        #expect(try created.json()["deviceKey"] as? String == "tpm")

        let source = try fixture.localFile("source.txt", Data("held by the TPM\n".utf8))
        let put = try fixture.run(["put", source.path, "a.txt", "--class", "complete"], extra: environment)
        #expect(put.status == 0, "\(put.standardError)")
        let cat = try fixture.run(["cat", "a.txt"], extra: environment)
        #expect(cat.status == 0 && cat.standardOutput == "held by the TPM\n", "\(cat.standardError)")
        let wrong = try fixture.run(["cat", "a.txt"], passcode: "9999", extra: environment)
        #expect(wrong.status != 0 && wrong.standardError.contains("incorrectPasscode"), "\(wrong.standardError)")

        let status = try fixture.run(["status", "--json"], extra: environment)
        #expect(status.status == 0, "\(status.standardError)")
        #expect(try status.json()["deviceKey"] as? String == "tpm")
        #expect(try fixture.run(["status"], extra: environment).standardOutput.contains("device key: tpm"))

        // The agent: it opens the recorded TPM device; clients learn the kind from its status reply.
        let started = try fixture.run(["agent", "start", "--auto-lock", "never"], extra: environment)
        #expect(started.status == 0, "\(started.standardError)")
        defer { _ = try? fixture.run(["agent", "stop"], extra: environment) }
        #expect(try fixture.run(["unlock"], extra: environment).status == 0)
        let served = try fixture.run(["status", "--json"], passcode: nil, extra: environment)
        #expect(served.status == 0, "\(served.standardError)")
        let report = try served.json()
        #expect(report["deviceKey"] as? String == "tpm")
        #expect(report["agent"] is [String: Any])
        let throughAgent = try fixture.run(["cat", "a.txt"], passcode: nil, extra: environment)
        #expect(throughAgent.status == 0 && throughAgent.standardOutput == "held by the TPM\n", "\(throughAgent.standardError)")
    }

    @Test("a file device says deviceKey file; a TPM device whose TPM cannot be reached is ioFailure naming DPCTL_TPM_TCTI")
    func unreachable() throws {
        let plain = try StoreFixture()
        try plain.initialize()
        #expect(try plain.run(["status", "--json"]).json()["deviceKey"] as? String == "file")

        let tpm = try SoftwareTPM()
        let fixture = try StoreFixture()
        let created = try fixture.run(["init", "--device-key", "tpm"], extra: ["DPCTL_TPM_TCTI": tpm.tcti])
        #expect(created.status == 0, "\(created.standardError)")
        tpm.stop()
        let status = try fixture.run(["status"], extra: ["DPCTL_TPM_TCTI": tpm.tcti])
        #expect(status.status == 24, "\(status.standardError)")
        #expect(status.standardError.contains("DPCTL_TPM_TCTI"), "\(status.standardError)")
    }

    @Test("in TPM lockout (two wrong passcodes, tpm2_dictionarylockout -n 2): status, class none, the agent and lock work; unlock is exit 12")
    func lockout() throws {
        let tpm = try SoftwareTPM()
        let fixture = try StoreFixture()
        let environment = ["DPCTL_TPM_TCTI": tpm.tcti]
        #expect(try fixture.run(["init", "--device-key", "tpm"], extra: environment).status == 0)
        let plain = try fixture.localFile("plain.txt", Data("no passcode needed\n".utf8))
        #expect(try fixture.run(["put", plain.path, "plain.txt", "--class", "none"], extra: environment).status == 0)
        let set = try tpm.runTool("tpm2_dictionarylockout", ["-s", "-n", "2", "-t", "60", "-l", "60"])
        #expect(set.status == 0, "\(set.output)")
        // Two wrong passcodes: each counts in the TPM's dictionary-attack counter as well; the TPM locks out.
        for guess in ["1111", "2222"] {
            let wrong = try fixture.run(["unlock"], passcode: guess, extra: environment)
            #expect(wrong.standardError.contains("incorrectPasscode"), "\(wrong.standardError)")
        }
        let locked = try fixture.run(["unlock"], passcode: "1234", extra: environment)
        #expect(locked.status == 12 && locked.standardError.contains("passcodeAttemptsDelayed"), "\(locked.standardError)")

        // Nothing else stops: a new process opens the device, says its status, reads class none.
        let status = try fixture.run(["status", "--json"], passcode: nil, extra: environment)
        #expect(status.status == 0, "\(status.standardError)")
        #expect(try status.json()["failedAttempts"] as? Int == 2)
        let read = try fixture.run(["cat", "plain.txt"], passcode: nil, extra: environment)
        #expect(read.status == 0 && read.standardOutput == "no passcode needed\n", "\(read.standardError)")
        // The agent starts on the locked-out TPM, serves class none, locks; its unlock is delayed, not counted.
        let started = try fixture.run(["agent", "start", "--auto-lock", "never"], extra: environment)
        #expect(started.status == 0, "\(started.standardError)")
        defer { _ = try? fixture.run(["agent", "stop"], extra: environment) }
        let served = try fixture.run(["cat", "plain.txt"], passcode: nil, extra: environment)
        #expect(served.status == 0 && served.standardOutput == "no passcode needed\n", "\(served.standardError)")
        #expect(try fixture.run(["lock"], passcode: nil, extra: environment).status == 0)
        let delayed = try fixture.run(["unlock"], passcode: "1234", extra: environment)
        #expect(delayed.status == 12 && delayed.standardError.contains("passcodeAttemptsDelayed"), "\(delayed.standardError)")
        #expect(try fixture.run(["status", "--json"], passcode: nil, extra: environment).json()["failedAttempts"] as? Int == 2)
    }
}
