import Foundation
import SodiumBridge
import SystemPackage
import Testing
import TPMBridge
@testable import DataProtection

/// The device key in a TPM (issue 34), against swtpm: the passcode bound in the TPM, a
/// device that opens only with its TPM, lockout as `passcodeAttemptsDelayed`, and a TPM
/// that cannot be reached as `ioFailure` naming `DPCTL_TPM_TCTI`.
@Suite("TPM device key", .serialized, .enabled(if: SoftwareTPM.isInstalled, "swtpm is not installed (Debian: swtpm swtpm-tools); CI installs it"))
struct TPMDeviceKeyTests {
    static func configuration(_ tpm: SoftwareTPM) -> DeviceConfiguration {
        var configuration = DeviceConfiguration.testing()
        configuration.deviceKeyKind = .tpm
        configuration.tpmTCTI = tpm.tcti
        return configuration
    }

    static func code(_ body: () throws -> Void) -> DataProtectionError.Code? {
        do {
            try body()
            return nil
        } catch let error as DataProtectionError {
            return error.code
        } catch {
            return nil
        }
    }

    /// One HMAC with the passcode object and `auth`, as an attacker with the TPM would: its error, `nil` if accepted.
    static func attempt(_ context: TPMContext, _ blobs: TPMKeyBlobs, _ auth: SecureBytes) -> TPMError? {
        do {
            _ = try context.hmac(key: blobs, authValue: auth, message: SecureBytes(copyingUTF8: TPMDeviceKey.Label.passcodeFactor))
            return nil
        } catch {
            return error
        }
    }

    @Test("create, unlock, lock, passcode change and removal, reboot: all on a TPM device, with no key file")
    func lifecycle() throws {
        let tpm = try SoftwareTPM()
        try withScratchDirectory { root in
            let directory = root.appendingPathComponent("device")
            let configuration = Self.configuration(tpm)
            var device: Device? = try Device(creatingAt: directory, passcode: "1234", clock: VirtualClock(), configuration: configuration)
            #expect(device?.deviceKeyKind == .tpm)
            #expect(!FileManager.default.fileExists(atPath: directory.appendingPathComponent("uid").path))
            #expect(FileManager.default.fileExists(atPath: directory.appendingPathComponent("tpm").path))
            #expect(Self.code { try device?.unlock(passcode: "1235") } == .incorrectPasscode)
            try device?.unlock(passcode: "1234")
            #expect(device?.isProtectedDataAvailable == true)
            try device?.lock()
            #expect(device?.isProtectedDataAvailable == false)
            try device?.unlock(passcode: "1234")
            try device?.changePasscode(from: "1234", to: "5678")
            try device?.lock()
            #expect(Self.code { try device?.unlock(passcode: "1234") } == .incorrectPasscode)
            try device?.unlock(passcode: "5678")
            try device?.reboot()
            #expect(device?.isProtectedDataAvailable == false)
            try device?.unlock(passcode: "5678")
            device = nil

            // Another process later (a new TPM connection), after the TPM itself restarted: the same device.
            try tpm.restart()
            var reopened: Device? = try Device(directory: directory, clock: VirtualClock(), configuration: DeviceConfiguration.testing(tpmTCTI: tpm.tcti))
            #expect(reopened?.deviceKeyKind == .tpm)
            try reopened?.unlock(passcode: "5678")
            try reopened?.removePasscode("5678")
            try reopened?.lock()
            try reopened?.unlock(passcode: nil as Passcode?)
            #expect(reopened?.hasPasscode == false)
            reopened = nil
        }
    }

    @Test("both directories copied to another TPM open nothing, even with the right passcode")
    func anotherTPM() throws {
        let tpm = try SoftwareTPM()
        try withScratchDirectory { root in
            let directory = root.appendingPathComponent("device")
            do {
                let device = try Device(creatingAt: directory, passcode: "1234", clock: VirtualClock(), configuration: Self.configuration(tpm))
                try device.unlock(passcode: "1234")
            }
            let other = try SoftwareTPM()
            #expect(Self.code {
                let device = try Device(directory: directory, clock: VirtualClock(), configuration: DeviceConfiguration.testing(tpmTCTI: other.tcti))
                try device.unlock(passcode: "1234")
            } == .integrityFailure)
        }
    }

    @Test("wrong guesses made directly against the TPM's passcode object lock the TPM; the next unlock is delayed, not counted")
    func lockout() throws {
        let tpm = try SoftwareTPM()
        let set = try tpm.runTool("tpm2_dictionarylockout", ["-s", "-n", "5", "-t", "2", "-l", "60"])
        #expect(set.status == 0, "\(set.output)")
        try withScratchDirectory { root in
            let directory = root.appendingPathComponent("device")
            let device = try Device(creatingAt: directory, passcode: "1234", clock: VirtualClock(), configuration: Self.configuration(tpm))
            try device.lock()
            // The attacker: the device directory and the TPM, the attempt counter bypassed.
            let bindings = try Data(contentsOf: directory.appendingPathComponent("tpm-passcode"))
            var reader = TPMFieldReader(bindings)
            _ = reader.take(5)
            let count = reader.uint8()
            #expect(count == 1)
            let saltCount = reader.uint8() ?? 0
            _ = reader.take(Int(saltCount))
            let publicArea = reader.prefixed()
            let privateArea = reader.prefixed()
            let blobs = TPMKeyBlobs(publicArea: try #require(publicArea), privateArea: try #require(privateArea))
            let attacker = try TPMContext(tcti: tpm.tcti)
            var refused = 0
            var lockedOut = false
            for guess in 0..<10 {
                let outcome = Self.attempt(attacker, blobs, SecureBytes(copyingUTF8: "guess \(guess)"))
                if outcome == .authorizationFailed { refused += 1 }
                if case .lockout = outcome { lockedOut = true }
                if lockedOut || outcome == nil { break }
            }
            attacker.close()
            #expect(refused == 5)
            #expect(lockedOut)
            let before = device.failedPasscodeAttempts
            let delayed = #expect(throws: DataProtectionError.self) { try device.unlock(passcode: "1234") }
            #expect(delayed?.code == .passcodeAttemptsDelayed)
            #expect(delayed?.retryAfter == .seconds(2))
            #expect(delayed?.message.contains("2 s") == true)
            #expect(device.failedPasscodeAttempts == before)
            #expect(!device.isProtectedDataAvailable)
        }
    }

    @Test("a wrong passcode counts in the TPM's dictionary-attack counter")
    func wrongPasscodeCountsInTheTPM() throws {
        let tpm = try SoftwareTPM()
        try withScratchDirectory { root in
            let device = try Device(creatingAt: root.appendingPathComponent("device"), passcode: "1234", clock: VirtualClock(),
                                    configuration: Self.configuration(tpm))
            // tpm2_getcap prints `TPM2_PT_LOCKOUT_COUNTER: 0x0`.
            let counter = { () throws -> Int in
                let output = try tpm.runTool("tpm2_getcap", ["properties-variable"]).output
                let lines = output.split(separator: "\n").map(String.init)
                let line = try #require(lines.first { $0.contains("TPM2_PT_LOCKOUT_COUNTER") })
                let value = try #require(line.split(separator: " ").last.map { String($0.dropFirst(2)) })
                return try #require(Int(value, radix: 16))
            }
            let before = try counter()
            #expect(Self.code { try device.unlock(passcode: "9999") } == .incorrectPasscode)
            #expect(try counter() == before + 1)
            try device.unlock(passcode: "1234")
        }
    }

    /// Copies the directory `source` to `destination` (replacing it).
    static func copy(_ source: URL, to destination: URL) throws {
        try? FileManager.default.removeItem(at: destination)
        try FileManager.default.copyItem(at: source, to: destination)
        try? FileManager.default.removeItem(at: destination.appendingPathComponent("lock"))
    }

    @Test("the effaceable key is in the TPM's NV storage: no effaceable file, and the keybag opens only with the TPM's key")
    func effaceableInNV() throws {
        let tpm = try SoftwareTPM()
        try withScratchDirectory { root in
            let directory = root.appendingPathComponent("device")
            let device = try Device(creatingAt: directory, passcode: "1234", clock: VirtualClock(), configuration: Self.configuration(tpm))
            try device.unlock(passcode: "1234")
            #expect(!FileManager.default.fileExists(atPath: directory.appendingPathComponent("effaceable").path))
            let record = try TPMDeviceRecord.decode(Data(contentsOf: directory.appendingPathComponent("tpm")))
            #expect((0x0180_0000...0x01BF_FFFF).contains(record.effaceableIndex))
            let read = try tpm.runTool("tpm2_nvreadpublic", ["0x" + String(record.effaceableIndex, radix: 16)])
            #expect(read.status == 0 && read.output.contains("size: 64"), "\(read.output)")
        }
    }

    @Test("after an erase, a copy of the device directory taken just before opens nothing, even with the right passcode")
    func eraseIsFinal() throws {
        let tpm = try SoftwareTPM()
        try withScratchDirectory { root in
            let directory = root.appendingPathComponent("device")
            let before = root.appendingPathComponent("before")
            let record: TPMDeviceRecord
            do {
                let device = try Device(creatingAt: directory, passcode: "1234", clock: VirtualClock(), configuration: Self.configuration(tpm))
                try device.unlock(passcode: "1234")
                try Self.copy(directory, to: before)
                record = try TPMDeviceRecord.decode(Data(contentsOf: directory.appendingPathComponent("tpm")))
                try device.erase()
                #expect(!device.hasPasscode)
            }
            try Self.copy(before, to: directory)
            #expect(Self.code {
                let device = try Device(directory: directory, clock: VirtualClock(), configuration: DeviceConfiguration.testing(tpmTCTI: tpm.tcti))
                try device.unlock(passcode: "1234")
            } == .integrityFailure)
            // The erase undefined the index the old key was in, and the fresh device's key is in a new definition of it.
            #expect(try tpm.runTool("tpm2_nvreadpublic", ["0x" + String(record.effaceableIndex, radix: 16)]).status == 0)
        }
    }

    @Test("a device directory copied before a passcode change is refused after it (the effaceable key rotated in NV storage)")
    func olderDirectoryAfterPasscodeChange() throws {
        let tpm = try SoftwareTPM()
        try withScratchDirectory { root in
            let directory = root.appendingPathComponent("device")
            let before = root.appendingPathComponent("before")
            do {
                let device = try Device(creatingAt: directory, passcode: "1234", clock: VirtualClock(), configuration: Self.configuration(tpm))
                try device.unlock(passcode: "1234")
                try Self.copy(directory, to: before)
                try device.changePasscode(from: "1234", to: "5678")
            }
            try Self.copy(before, to: directory)
            #expect(Self.code {
                let device = try Device(directory: directory, clock: VirtualClock(), configuration: DeviceConfiguration.testing(tpmTCTI: tpm.tcti))
                try device.unlock(passcode: "1234")
            } == .integrityFailure)
        }
    }

    @Test("a device directory copied before wrong attempts is refused after them: the TPM's counter marks the attempt counter")
    func olderDirectoryAfterWrongAttempts() throws {
        let tpm = try SoftwareTPM()
        try withScratchDirectory { root in
            let directory = root.appendingPathComponent("device")
            let before = root.appendingPathComponent("before")
            do {
                let device = try Device(creatingAt: directory, passcode: "1234", clock: VirtualClock(), configuration: Self.configuration(tpm))
                try Self.copy(directory, to: before)
                for guess in ["1111", "2222", "3333"] {
                    #expect(Self.code { try device.unlock(passcode: guess) } == .incorrectPasscode)
                }
                #expect(device.failedPasscodeAttempts == 3)
            }
            let current = root.appendingPathComponent("current")
            try Self.copy(directory, to: current)
            try Self.copy(before, to: directory)
            let restored = #expect(throws: DataProtectionError.self) {
                _ = try Device(directory: directory, clock: VirtualClock(), configuration: DeviceConfiguration.testing(tpmTCTI: tpm.tcti))
            }
            #expect(restored?.code == .integrityFailure)
            #expect(restored?.message.contains("older") == true)
            // The current directory still opens, with its three failures.
            try Self.copy(current, to: directory)
            let device = try Device(directory: directory, clock: VirtualClock(), configuration: DeviceConfiguration.testing(tpmTCTI: tpm.tcti))
            #expect(device.failedPasscodeAttempts == 3)
        }
    }

    @Test("a crash between the attempt counter's file and the TPM counter's increment is completed at the next opening")
    func crashBeforeTheIncrement() throws {
        let tpm = try SoftwareTPM()
        try withScratchDirectory { root in
            let directory = root.appendingPathComponent("device")
            do {
                _ = try Device(creatingAt: directory, passcode: "1234", clock: VirtualClock(), configuration: Self.configuration(tpm))
            }
            // What the write of step 1 leaves when the power goes before step 2: the file for c + 1, the counter at c.
            let files = DeviceFiles(directory: FilePath(directory.path), fileSystem: PosixFileSystem())
            let key = try TPMDeviceKey.open(files: files, tcti: tpm.tcti, create: false)
            let counter = try key.counterValue()
            let macKey = try KeyHierarchy(deviceKey: key).attemptCounterKey()
            var record = AttemptRecord()
            record.failures = 2
            var file = Data()
            file.appendBigEndian(UInt32(truncatingIfNeeded: (counter + 1) >> 32))
            file.appendBigEndian(UInt32(truncatingIfNeeded: counter + 1))
            file.append(record.encoded(macKey: DeviceFiles.epochKey(macKey, counter + 1)))
            try file.write(to: directory.appendingPathComponent("attempts"))
            key.context.close()
            do {
                let device = try Device(directory: directory, clock: VirtualClock(), configuration: DeviceConfiguration.testing(tpmTCTI: tpm.tcti))
                #expect(device.failedPasscodeAttempts == 2)
            }
            // The opening completed step 2.
            let reopened = try TPMDeviceKey.open(files: files, tcti: tpm.tcti, create: false)
            #expect(try reopened.counterValue() == counter + 1)
            reopened.context.close()
        }
    }

    @Test("forensics on a TPM device: no recorded device-directory bytes, with the TPM, open anything from before an erase")
    func forensicErase() throws {
        let tpm = try SoftwareTPM()
        try withScratchDirectory { root in
            let recorder = ForensicRecordingTests.RecordingFileSystem()
            let device = try Device(directory: FilePath(root.appendingPathComponent("device").path), clock: VirtualClock(),
                                    configuration: Self.configuration(tpm), fileSystem: recorder, creatingWithPasscode: Passcode("1111"))
            let store = try ProtectedStore(directory: root.appendingPathComponent("files"), device: device)
            let hierarchy = device.hierarchy
            let nv = try #require(device.files.effaceableNV)
            try device.unlock(passcode: "1111")
            try store.write(Data("class none content".utf8), to: "plain.txt", protection: .none)
            var effaceableKeys: [Data] = []
            func remember() throws {
                let slots = try #require(try nv.readEffaceable())
                slots.withUnsafeBytes { bytes in
                    for offset in [0, 32] where bytes[offset..<offset + 32].contains(where: { $0 != 0 }) {
                        effaceableKeys.append(Data(bytes[offset..<offset + 32]))
                    }
                }
            }
            try remember()
            try device.changePasscode(from: "1111", to: "2222")
            try remember()
            try device.removePasscode("2222")
            try remember()
            let before = Set(try ForensicRecordingTests.openable(recorder.recoverable(under: root) + [try Self.effaceableFile(nv)], hierarchy: hierarchy)
                .flatMap { try ForensicRecordingTests.keysWithoutPasscode($0, hierarchy: hierarchy) })
            #expect(before.count == KeybagSlot.allCases.count, "before the erase, the current keybag opens with the TPM")
            try device.erase()

            // No effaceable key was ever written to the disk, in any version of any file.
            #expect(!recorder.history.contains { $0.starts(with: Data("DPEF".utf8)) })
            for key in Set(effaceableKeys) {
                #expect(!recorder.history.contains { $0.range(of: key) != nil }, "an effaceable key reached the disk")
            }
            // Every version of every file ever written, with what the TPM holds now: only the fresh keybag opens.
            let opened = ForensicRecordingTests.openable(recorder.history + [try Self.effaceableFile(nv)], hierarchy: hierarchy)
            #expect(opened.count == 1, "after the erase, only the fresh keybag opens (\(opened.count) do)")
            let after = Set(try opened.flatMap { try ForensicRecordingTests.keysWithoutPasscode($0, hierarchy: hierarchy) })
            #expect(after.isDisjoint(with: before), "a key from before the erase is still recoverable")
            #expect(recorder.history.count > 10, "the recording saw the disk (\(recorder.history.count) versions)")
        }
    }

    /// The TPM's effaceable slots dressed as an `effaceable` file, for ``ForensicRecordingTests/openable(_:hierarchy:)``.
    static func effaceableFile(_ nv: TPMDeviceKey) throws -> Data {
        let slots = try #require(try nv.readEffaceable())
        return Data("DPEF".utf8) + Data([2]) + slots.withUnsafeBytes { Data($0) }
    }

    @Test("a TPM that cannot be reached is ioFailure naming DPCTL_TPM_TCTI")
    func unreachable() throws {
        try withScratchDirectory { root in
            var configuration = DeviceConfiguration.testing()
            configuration.deviceKeyKind = .tpm
            configuration.tpmTCTI = "swtpm:host=127.0.0.1,port=1"
            let unreachable = #expect(throws: DataProtectionError.self) {
                _ = try Device(creatingAt: root.appendingPathComponent("device"), passcode: "1234", clock: VirtualClock(), configuration: configuration)
            }
            #expect(unreachable?.code == .ioFailure)
            #expect(unreachable?.hint?.contains("DPCTL_TPM_TCTI") == true)
            #expect(unreachable?.message.contains("port=1") == true)
        }
    }
}

extension DeviceConfiguration {
    /// The test rules, reaching the TPM at `tcti` (an existing device keeps its recorded key kind).
    static func testing(tpmTCTI: String) -> DeviceConfiguration {
        var configuration = DeviceConfiguration.testing()
        configuration.tpmTCTI = tpmTCTI
        return configuration
    }
}
