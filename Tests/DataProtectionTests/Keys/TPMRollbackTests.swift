import Foundation
import SodiumBridge
import Testing
import TPMBridge
@testable import DataProtection

/// Rollback of single device files on a TPM device (`Keys/key-hierarchy.md` §4.4.4): an older
/// keybag alone, an older attempt counter alone, and both, restored after a passcode change
/// and after wrong attempts. The attempt counter is bound to the TPM's counter; the keybag
/// is bound to the effaceable key rotated in the TPM's NV storage by every keybag write.
@Suite("TPM rollback", .serialized, .enabled(if: SoftwareTPM.isInstalled, "swtpm is not installed (Debian: swtpm swtpm-tools); CI installs it"))
struct TPMRollbackTests {
    /// What opening the device with `files` of `old` restored over the current directory gives
    /// (boot and an unlock with each passcode); the current directory is put back afterwards.
    static func restoring(_ files: [String], from old: URL, into directory: URL, tpm: SoftwareTPM, passcodes: [String]) throws
        -> [DataProtectionError.Code?]
    {
        let current = directory.deletingLastPathComponent().appendingPathComponent("current")
        try TPMDeviceKeyTests.copy(directory, to: current)
        defer { try? TPMDeviceKeyTests.copy(current, to: directory) }
        for name in files {
            let target = directory.appendingPathComponent(name)
            try FileManager.default.removeItem(at: target)
            try FileManager.default.copyItem(at: old.appendingPathComponent(name), to: target)
        }
        return passcodes.map { passcode in
            TPMDeviceKeyTests.code {
                let device = try Device(directory: directory, clock: VirtualClock(), configuration: DeviceConfiguration.testing(tpmTCTI: tpm.tcti))
                try device.unlock(passcode: passcode)
            }
        }
    }

    @Test("after a passcode change (and wrong attempts after it), an older keybag, attempt counter, or both: integrityFailure")
    func afterPasscodeChange() throws {
        let tpm = try SoftwareTPM()
        try withScratchDirectory { root in
            let directory = root.appendingPathComponent("device")
            let before = root.appendingPathComponent("before")
            let afterChange = root.appendingPathComponent("after-change")
            do {
                let device = try Device(creatingAt: directory, passcode: "1234", clock: VirtualClock(), configuration: TPMDeviceKeyTests.configuration(tpm))
                try device.unlock(passcode: "1234")
                try TPMDeviceKeyTests.copy(directory, to: before)
                try device.changePasscode(from: "1234", to: "5678")
                try TPMDeviceKeyTests.copy(directory, to: afterChange)
                for guess in ["1111", "2222"] {
                    #expect(TPMDeviceKeyTests.code { try device.unlock(passcode: guess) } == .incorrectPasscode)
                }
            }
            // From before the change: either passcode, every combination.
            for files in [["keybag"], ["attempts"], ["keybag", "attempts"]] {
                let outcomes = try Self.restoring(files, from: before, into: directory, tpm: tpm, passcodes: ["1234", "5678"])
                #expect(outcomes == [.integrityFailure, .integrityFailure], "\(files) from before the change: \(outcomes)")
            }
            // From after the change but before the wrong attempts: the attempt counter is older (the keybag is the same).
            for files in [["attempts"], ["keybag", "attempts"]] {
                let outcomes = try Self.restoring(files, from: afterChange, into: directory, tpm: tpm, passcodes: ["5678"])
                #expect(outcomes == [.integrityFailure], "\(files) from before the wrong attempts: \(outcomes)")
            }
            // The current directory still opens, with its two failures.
            let device = try Device(directory: directory, clock: VirtualClock(), configuration: DeviceConfiguration.testing(tpmTCTI: tpm.tcti))
            #expect(device.failedPasscodeAttempts == 2)
            try device.unlock(passcode: "5678")
        }
    }

    @Test("after wrong attempts alone, an older attempt counter (alone or with the keybag) is integrityFailure; the keybag did not change")
    func afterWrongAttempts() throws {
        let tpm = try SoftwareTPM()
        try withScratchDirectory { root in
            let directory = root.appendingPathComponent("device")
            let before = root.appendingPathComponent("before")
            do {
                let device = try Device(creatingAt: directory, passcode: "1234", clock: VirtualClock(), configuration: TPMDeviceKeyTests.configuration(tpm))
                try TPMDeviceKeyTests.copy(directory, to: before)
                for guess in ["1111", "2222", "3333"] {
                    #expect(TPMDeviceKeyTests.code { try device.unlock(passcode: guess) } == .incorrectPasscode)
                }
            }
            for files in [["attempts"], ["keybag", "attempts"]] {
                let outcomes = try Self.restoring(files, from: before, into: directory, tpm: tpm, passcodes: ["1234"])
                #expect(outcomes == [.integrityFailure], "\(files): \(outcomes)")
            }
            // Wrong attempts do not write the keybag: "an older keybag" is the current one, byte for byte, and
            // restoring it gives nothing back (the three failures stand).
            #expect(try Data(contentsOf: before.appendingPathComponent("keybag")) == Data(contentsOf: directory.appendingPathComponent("keybag")))
            let device = try Device(directory: directory, clock: VirtualClock(), configuration: DeviceConfiguration.testing(tpmTCTI: tpm.tcti))
            #expect(device.failedPasscodeAttempts == 3)
        }
    }
}
