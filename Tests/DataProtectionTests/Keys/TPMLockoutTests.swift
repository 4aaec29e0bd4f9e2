import Foundation
import SodiumBridge
import SystemPackage
import Testing
import TPMBridge
@testable import DataProtection

/// No TPM object or NV index of a TPM device is `noDA` (issue 34), and a TPM in
/// dictionary-attack lockout (which any local process can cause with wrong guesses) does not
/// brick the device: boot, class `none`, `lock` and status work through the two exemptions of
/// the TPM (owner-authorised NV indexes, a policy session without an auth value); only the
/// passcode is refused, as `passcodeAttemptsDelayed`.
@Suite("TPM lockout", .serialized, .enabled(if: SoftwareTPM.isInstalled, "swtpm is not installed (Debian: swtpm swtpm-tools); CI installs it"))
struct TPMLockoutTests {
    /// The passcode object's blobs, read from `tpm-passcode` (its only binding).
    static func passcodeObject(in directory: URL) throws -> TPMKeyBlobs {
        var reader = TPMFieldReader(try Data(contentsOf: directory.appendingPathComponent("tpm-passcode")))
        _ = reader.take(5)
        #expect(reader.uint8() == 1)
        _ = reader.take(Int(reader.uint8() ?? 0))
        let publicArea = reader.prefixed()
        let privateArea = reader.prefixed()
        return TPMKeyBlobs(publicArea: try #require(publicArea), privateArea: try #require(privateArea))
    }

    /// Wrong auth values at the passcode object until the TPM locks out, as an attacker with the
    /// device directory and the TPM would (the attempt counter bypassed).
    static func lockOut(_ tpm: SoftwareTPM, passcodeObject: TPMKeyBlobs) throws {
        let attacker = try TPMContext(tcti: tpm.tcti)
        defer { attacker.close() }
        for guess in 0..<10 {
            do {
                _ = try attacker.hmac(key: passcodeObject, authValue: SecureBytes(copyingUTF8: "guess \(guess)"),
                                      message: SecureBytes(copyingUTF8: TPMDeviceKey.Label.passcodeFactor))
                Issue.record("a wrong auth value was accepted")
                return
            } catch .lockout {
                return
            } catch .authorizationFailed {
                continue
            }
        }
        Issue.record("the TPM never locked out")
    }

    @Test("every object and NV index of a TPM device is dictionary-attack protected: noDA clear, as the TPM reports them")
    func noObjectIsNoDA() throws {
        let tpm = try SoftwareTPM()
        try withScratchDirectory { root in
            let directory = root.appendingPathComponent("device")
            let device = try Device(creatingAt: directory, passcode: "1234", clock: VirtualClock(),
                                    configuration: TPMDeviceKeyTests.configuration(tpm))
            try device.unlock(passcode: "1234")
            let record = try TPMDeviceRecord.decode(Data(contentsOf: directory.appendingPathComponent("tpm")))
            let passcode = try Self.passcodeObject(in: directory)
            let reader = try TPMContext(tcti: tpm.tcti)
            defer { reader.close() }
            // TPM2_ReadPublic on the loaded objects; TPM2_NV_ReadPublic on the indexes.
            // TPM 2.0 Part 2: TPMA_OBJECT noDA bit 10, userWithAuth bit 6; TPMA_NV OWNERWRITE bit 1,
            // AUTHWRITE bit 2, OWNERREAD bit 17, AUTHREAD bit 18, NO_DA bit 25.
            let noDA: UInt32 = 1 << 10
            let userWithAuth: UInt32 = 1 << 6
            let ownerReadWrite: UInt32 = 1 << 17 | 1 << 1
            let authReadWrite: UInt32 = 1 << 18 | 1 << 2
            let srk = try reader.objectAttributes(of: nil)
            let deviceKey = try reader.objectAttributes(of: record.deviceKey)
            let passcodeObject = try reader.objectAttributes(of: passcode)
            #expect(srk & noDA == 0, "the storage root key is noDA")
            #expect(deviceKey & noDA == 0, "the device key is noDA")
            #expect(passcodeObject & noDA == 0, "the passcode object is noDA")
            // The SRK and the device key are used through a policy session only; the passcode object with its auth value.
            #expect(srk & userWithAuth == 0 && deviceKey & userWithAuth == 0)
            #expect(passcodeObject & userWithAuth != 0)
            for index in [record.effaceableIndex, record.counterIndex] {
                let attributes = try reader.indexAttributes(index)
                #expect(attributes & 1 << 25 == 0, "NV index 0x\(String(index, radix: 16)) is NO_DA")
                #expect(attributes & ownerReadWrite == ownerReadWrite)
                #expect(attributes & authReadWrite == 0)
                // tpm2-tools agrees (its own reading of TPM2_NV_ReadPublic).
                let tool = try tpm.runTool("tpm2_nvreadpublic", ["0x" + String(index, radix: 16)])
                #expect(tool.status == 0 && tool.output.contains("ownerread") && !tool.output.contains("no_da"), "\(tool.output)")
            }
        }
    }

    @Test("in TPM lockout the device boots, reads class none, locks and says status; unlock is passcodeAttemptsDelayed")
    func lockoutDoesNotBrick() throws {
        let tpm = try SoftwareTPM()
        try withScratchDirectory { root in
            let directory = root.appendingPathComponent("device")
            let files = root.appendingPathComponent("files")
            do {
                let device = try Device(creatingAt: directory, passcode: "1234", clock: VirtualClock(),
                                        configuration: TPMDeviceKeyTests.configuration(tpm))
                try device.unlock(passcode: "1234")
                let store = try ProtectedStore(directory: files, device: device)
                try store.write(Data("plain".utf8), to: "plain.txt", protection: .none)
                try store.write(Data("secret".utf8), to: "secret.txt", protection: .complete)
                try device.lock()
            }
            let set = try tpm.runTool("tpm2_dictionarylockout", ["-s", "-n", "2", "-t", "60", "-l", "60"])
            #expect(set.status == 0, "\(set.output)")
            try Self.lockOut(tpm, passcodeObject: try Self.passcodeObject(in: directory))

            // Boot from the disk in lockout (a new process: a new TPM connection, the SRK created again).
            let device = try Device(directory: directory, clock: VirtualClock(), configuration: DeviceConfiguration.testing(tpmTCTI: tpm.tcti))
            #expect(device.deviceKeyKind == .tpm)
            #expect(!device.isProtectedDataAvailable)
            let store = try ProtectedStore(directory: files, device: device)
            #expect(try store.contents(atPath: "plain.txt") == Data("plain".utf8))
            #expect(TPMDeviceKeyTests.code { _ = try store.contents(atPath: "secret.txt") } == .protectedDataUnavailable)
            try device.lock()
            let before = device.failedPasscodeAttempts
            let delayed = #expect(throws: DataProtectionError.self) { try device.unlock(passcode: "1234") }
            #expect(delayed?.code == .passcodeAttemptsDelayed)
            #expect(delayed?.retryAfter == .seconds(60))
            #expect(device.failedPasscodeAttempts == before, "an attempt the TPM refused unseen is not counted")
            // The attempt counter was written in lockout (the NV counter, owner-authorised, still advances).
            #expect(!device.isProtectedDataAvailable)
        }
    }

    @Test("a device made with the version-1 templates (noDA objects) is refused by name: integrityFailure")
    func versionOneRecordIsRefused() throws {
        let tpm = try SoftwareTPM()
        try withScratchDirectory { root in
            let directory = root.appendingPathComponent("device")
            do {
                _ = try Device(creatingAt: directory, passcode: "1234", clock: VirtualClock(), configuration: TPMDeviceKeyTests.configuration(tpm))
            }
            let path = directory.appendingPathComponent("tpm")
            var record = try Data(contentsOf: path)
            record[4] = 1
            try record.write(to: path)
            let refused = #expect(throws: DataProtectionError.self) {
                _ = try Device(directory: directory, clock: VirtualClock(), configuration: DeviceConfiguration.testing(tpmTCTI: tpm.tcti))
            }
            #expect(refused?.code == .integrityFailure)
            #expect(refused?.message.contains("version 1") == true && refused?.message.contains("noDA") == true, "\(refused?.message ?? "")")
        }
    }
}
