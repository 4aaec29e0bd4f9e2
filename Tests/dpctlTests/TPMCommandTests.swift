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
}
