import Foundation
import Testing
@testable import DataProtection
import SodiumBridge
import SystemPackage

/// Runs the known-answer vectors of `Keys/vectors` (see `Keys/README.md`).
///
/// The vectors come from an independent implementation of `Keys/key-hierarchy.md`
/// (`Keys/vectors/generate.py`); each is one test case, opened both by the
/// parsers directly and by a `Device` booted from a device directory.
@Suite("Key hierarchy vectors")
struct KeyHierarchyVectorTests {
    // MARK: - Keybag vectors

    @Test("Keybag vector", arguments: VectorFile.names(in: .keybag))
    func keybag(_ name: String) throws {
        let vector = try VectorFile(name)
        let expect = try vector.expectation()
        let uid = try vector.hex("uid")
        let effaceable = try vector.hex("effaceable")
        let passcode = try vector.passcode()
        try #require(uid.count == 32 && effaceable.count == 32, "uid and effaceable must be 32 bytes")

        // The parser on its own.
        let hierarchy = KeyHierarchy(deviceKey: FileDeviceKey(key: .vector(uid)))
        let sealKey = try hierarchy.sealKey(effaceable: .vector(effaceable))
        var parsed: Keybag?
        do throws(DataProtectionError) {
            parsed = try Keybag.open(file: vector.payload, sealKey: sealKey)
        } catch {
            #expect(expect == .integrityFailure && error.code == .integrityFailure,
                    "Keybag.open threw \(error); the vector expects \(expect)")
        }
        if expect != .integrityFailure {
            let keybag = try #require(parsed, "Keybag.open must accept a keybag the vector calls sound")
            try checkParameters(of: keybag, against: vector)
            if expect == .success {
                let publicKey = try vector.hex("class-b-public")
                #expect(keybag.classBPublicKey == publicKey)
                // Re-encoding the parsed body gives back the authenticated bytes.
                let header = vector.payload.prefix(5)
                let nonce = vector.payload.dropFirst(5).prefix(24)
                let body = try XChaCha20Poly1305.open(
                    Data(vector.payload.dropFirst(29)), using: sealKey, nonce: Data(nonce), authenticating: Data(header))
                #expect(keybag.encodedBody() == body)
            }
        }

        // A device booted from a directory holding the vector.
        try withDeviceDirectory { directory in
            try write(Data("DPUK".utf8) + [1] + uid, to: directory, "uid")
            try write(Data("DPEF".utf8) + [2] + effaceable + Data(count: 32), to: directory, "effaceable")
            try write(vector.payload, to: directory, "keybag")
            try write(AttemptRecord().encoded(macKey: try hierarchy.attemptCounterKey()), to: directory, "attempts")

            let clock = VirtualClock()
            let device: Device
            do throws(DataProtectionError) {
                device = try Device(directory: .init(directory.path), clock: clock,
                                    configuration: DeviceConfiguration(passcodeCost: .minimal), fileSystem: PosixFileSystem())
            } catch {
                // Integrity failures may surface when the keybag is opened at boot.
                #expect(expect == .integrityFailure && error.code == .integrityFailure,
                        "booting threw \(error); the vector expects \(expect)")
                return
            }
            #expect(parsed != nil, "Keybag.open refused the keybag, so booting must refuse it too")
            #expect(device.state == .booted)
            let expected = try expect == .success ? expectedKeys(vector) : [:]
            if expect == .success {
                // The device-only keys are in memory from boot, the passcode-class keys are not.
                for slot in KeybagSlot.allCases {
                    let fingerprint = slot.isPasscodeWrapped ? nil : BLAKE2b.hash([.secret(.vector(expected[slot]!))])
                    #expect(device.keyFingerprint(slot) == fingerprint, "slot \(slot) before unlock")
                }
            }

            do throws(DataProtectionError) {
                try device.unlock(passcode: passcode)
            } catch {
                #expect(error.code == expect.code, "unlock threw \(error); the vector expects \(expect)")
                #expect(device.state == .booted)
                #expect(device.keyFingerprint(.complete) == nil)
                if expect == .incorrectPasscode {
                    if try vector.field("kdf") == "none", try !(vector.passcode() ?? "").isEmpty {
                        // A passcode given to a device without one is refused before it is counted (§8.5).
                        #expect(device.failedPasscodeAttempts == 0)
                    } else {
                        try checkCountedFailure(vector, in: directory, device: device, clock: clock, hierarchy: hierarchy)
                    }
                }
                return
            }
            try #require(expect == .success, "unlock succeeded; the vector expects \(expect)")
            #expect(device.state == .unlocked)
            #expect(device.isProtectedDataAvailable)
            #expect(device.failedPasscodeAttempts == 0)
            for slot in KeybagSlot.allCases {
                #expect(device.keyFingerprint(slot) == BLAKE2b.hash([.secret(.vector(expected[slot]!))]), "slot \(slot)")
            }
            let publicKey = try vector.hex("class-b-public")
            #expect(device.classBPublicKey == publicKey)
            #expect(X25519.publicKey(for: .vector(expected[.completeUnlessOpenSecret]!)) == publicKey,
                    "the class B public key is X25519(secret, 9)")
            let kdf = try vector.field("kdf")
            #expect(device.hasPasscode == (kdf != "none"))
        }
    }

    // MARK: - Attempt counter vectors

    @Test("Attempt counter vector", arguments: VectorFile.names(in: .attempts))
    func attempts(_ name: String) throws {
        let vector = try VectorFile(name)
        let expect = try vector.expectation()
        try #require(expect != .incorrectPasscode, "attempt counter vectors expect success or integrityFailure")
        let uid = try vector.hex("uid")
        try #require(uid.count == 32, "uid must be 32 bytes")
        let hierarchy = KeyHierarchy(deviceKey: FileDeviceKey(key: .vector(uid)))
        let counterKey = try hierarchy.attemptCounterKey()

        // The parser on its own.
        var expected: AttemptRecord?
        if expect == .success {
            let record = try AttemptRecord.decode(vector.payload, macKey: counterKey)
            let failures = try #require(UInt32(try vector.field("failures")), "failures: a decimal UInt32")
            let last = try vector.field("last-failure-ns")
            let fingerprint = try vector.field("fingerprint")
            let wanted = AttemptRecord(
                failures: failures,
                lastFailure: last == "none" ? nil : DeviceInstant(nanoseconds: try #require(Int64(last))),
                lastFailedFingerprint: fingerprint == "none" ? nil : try VectorFile.data(hex: fingerprint))
            #expect(record == wanted)
            #expect(record.encoded(macKey: counterKey) == vector.payload, "the encoding is canonical")
            if vector.fields["fingerprint-of-key"] != nil {
                let key = try vector.hex("fingerprint-of-key")
                #expect(try hierarchy.passcodeFingerprint(.derivedKey(.vector(key))) == record.lastFailedFingerprint)
            }
            if vector.fields["fingerprint-of-passcode-hex"] != nil {
                let passcode = try vector.hex("fingerprint-of-passcode-hex")
                #expect(try hierarchy.passcodeFingerprint(.passcode(.vector(passcode))) == record.lastFailedFingerprint)
            }
            expected = wanted
        } else {
            let error = #expect(throws: DataProtectionError.self) {
                _ = try AttemptRecord.decode(vector.payload, macKey: counterKey)
            }
            #expect(error?.code == .integrityFailure)
        }

        // A device that boots with this counter: a record that does not
        // authenticate is replaced by the punitive one (9 failures, from now).
        try withDeviceDirectory { directory in
            try write(Data("DPUK".utf8) + [1] + uid, to: directory, "uid")
            let clock = VirtualClock(start: DeviceInstant(nanoseconds: 1_000_000_000_000_000_000))
            let configuration = DeviceConfiguration(passcodeCost: .minimal)
            _ = try Device(directory: .init(directory.path), clock: clock, configuration: configuration,
                           fileSystem: PosixFileSystem())
            try write(vector.payload, to: directory, "attempts")
            let device = try Device(directory: .init(directory.path), clock: clock, configuration: configuration,
                                    fileSystem: PosixFileSystem())
            let stored = try AttemptRecord.decode(
                try Data(contentsOf: directory.appendingPathComponent("attempts")), macKey: counterKey)
            if let expected {
                #expect(device.failedPasscodeAttempts == Int(expected.failures))
                #expect(stored == expected, "a valid counter is kept as it is")
            } else {
                let punitive = AttemptRecord.punitive(at: clock.now)
                #expect(punitive.failures == 9 && punitive.lastFailure == clock.now && punitive.lastFailedFingerprint == nil)
                #expect(device.failedPasscodeAttempts == 9)
                #expect(device.nextPasscodeAttemptAllowed == clock.now + .seconds(3600))
                #expect(stored == punitive, "the punitive record is written back at boot")
            }
        }
    }

    // MARK: - Device file vectors (`uid`, `effaceable`)

    @Test("Device file vector", arguments: VectorFile.names(in: .device))
    func deviceFile(_ name: String) throws {
        let vector = try VectorFile(name)
        let expect = try vector.expectation()
        try #require(expect != .incorrectPasscode, "device file vectors expect success or integrityFailure")
        let file = try vector.field("file")
        let failsAt = expect == .integrityFailure ? try vector.field("fails-at") : nil
        try #require(["uid", "effaceable"].contains(file) && [nil, "parse", "boot"].contains(failsAt))
        try withDeviceDirectory { directory in
            let path = FilePath(directory.path)
            try write(vector.payload, to: directory, file)

            // The parser on its own: the keys it reads, as fingerprints (`nil`: an empty slot).
            var parsed: [Data?]?
            do throws(DataProtectionError) {
                if file == "uid" {
                    parsed = [try FileDeviceKey.decode(SecureBytes.vector(vector.payload)).fingerprint]
                } else {
                    parsed = try DeviceFiles(directory: path, fileSystem: PosixFileSystem()).readEffaceableSlots()?.map { $0?.fingerprint }
                }
            } catch {
                #expect(failsAt == "parse" && error.code == .integrityFailure, "the parser threw \(error); the vector expects \(expect)")
            }
            #expect((parsed != nil) == (failsAt != "parse"), "the parser accepted a file the vector refuses at parse")
            if expect == .success {
                let wanted: [Data?] = try file == "uid" ? [vector.hex("key").fingerprint] : (0..<2).map { index in
                    try vector.field("slot-\(index)") == "empty" ? nil : try vector.hex("slot-\(index)").fingerprint
                }
                #expect(parsed == wanted, "the keys the parser read")
            }

            // A device booted from the directory: the other files are the vector's.
            if file == "uid" {
                try write(try vector.hex("effaceable-file"), to: directory, "effaceable")
            } else {
                try write(Data("DPUK".utf8) + [1] + (try vector.hex("uid")), to: directory, "uid")
            }
            try write(try vector.hex("keybag"), to: directory, "keybag")
            let device: Device
            do throws(DataProtectionError) {
                device = try Device(directory: .init(directory.path), clock: VirtualClock(),
                                    configuration: DeviceConfiguration(passcodeCost: .minimal), fileSystem: PosixFileSystem())
            } catch {
                #expect(expect == .integrityFailure && error.code == .integrityFailure, "booting threw \(error); the vector expects \(expect)")
                return
            }
            try #require(expect == .success, "booting succeeded; the vector expects \(expect)")
            #expect(device.state == .booted)
            let effaceable = try Data(contentsOf: directory.appendingPathComponent("effaceable"))
            if vector.fields["key-metadata"] != nil {
                // The keybag opened under the slot the vector sealed it with, and the other slot was emptied.
                #expect(device.keyFingerprint(.metadata) == BLAKE2b.hash([.secret(.vector(try vector.hex("key-metadata")))]))
                #expect(effaceable == (try vector.hex("after-boot")), "the effaceable file after boot")
            } else {
                // Erased: created afresh, with a new key in slot 0 and a new keybag.
                #expect(effaceable.count == 69 && effaceable.prefix(5) == Data("DPEF".utf8) + [2])
                #expect(effaceable[5..<37] != Data(count: 32) && effaceable[37...] == Data(count: 32))
                #expect(try Data(contentsOf: directory.appendingPathComponent("keybag")) != (try vector.hex("keybag")))
            }
        }
    }

    // MARK: - The folder itself

    /// A missing or emptied folder would make every parameterised test above pass vacuously.
    @Test("Vector folders hold every class of vector")
    func foldersAreComplete() throws {
        let keybag = try VectorFile.names(in: .keybag).map { try VectorFile($0).expectation() }
        #expect(keybag.count >= 20, "\(VectorFile.folder.path) holds \(keybag.count) keybag vectors")
        for expectation in [Expectation.success, .incorrectPasscode, .integrityFailure] {
            #expect(keybag.contains(expectation), "no keybag vector expects \(expectation)")
        }
        let attempts = try VectorFile.names(in: .attempts).map { try VectorFile($0).expectation() }
        #expect(attempts.count >= 5, "\(VectorFile.folder.path)/attempts holds \(attempts.count) vectors")
        #expect(attempts.contains(.success) && attempts.contains(.integrityFailure))
        let device = try VectorFile.names(in: .device).map { try VectorFile($0) }
        #expect(device.count >= 20, "\(VectorFile.folder.path)/device holds \(device.count) vectors")
        for file in ["uid", "effaceable"] {
            let expectations = try device.filter { $0.fields["file"] == file }.map { try $0.expectation() }
            #expect(expectations.contains(.success) && expectations.contains(.integrityFailure), "\(file)")
        }
    }

    // MARK: - Helpers

    /// After a wrong passcode: the counter on disk holds one failure, now, with
    /// the vector's fingerprint; presenting the same passcode again is not counted.
    private func checkCountedFailure(
        _ vector: VectorFile, in directory: URL, device: Device, clock: VirtualClock, hierarchy: KeyHierarchy
    ) throws {
        let counterFile = directory.appendingPathComponent("attempts")
        let counterKey = try hierarchy.attemptCounterKey()
        let stored = try AttemptRecord.decode(try Data(contentsOf: counterFile), macKey: counterKey)
        let fingerprint = try vector.hex("failed-fingerprint")
        #expect(stored == AttemptRecord(failures: 1, lastFailure: clock.now, lastFailedFingerprint: fingerprint))
        #expect(device.failedPasscodeAttempts == 1)

        let error = #expect(throws: DataProtectionError.self) { try device.unlock(passcode: try vector.passcode()) }
        #expect(error?.code == .incorrectPasscode)
        #expect(device.failedPasscodeAttempts == 1, "an immediate repeat is not counted again")
        #expect(try AttemptRecord.decode(try Data(contentsOf: counterFile), macKey: counterKey) == stored)
    }

    private func checkParameters(of keybag: Keybag, against vector: VectorFile) throws {
        switch try vector.field("kdf") {
        case "none":
            #expect(keybag.passcode == .none)
        case "argon2id":
            let salt = try vector.hex("argon2id-salt")
            let operations = try #require(UInt64(try vector.field("argon2id-ops")))
            let memory = try #require(UInt64(try vector.field("argon2id-mem")))
            #expect(keybag.passcode == .argon2id(salt: salt, operations: operations, memory: memory))
        case let other:
            Issue.record("unknown kdf \(other)")
        }
    }

    private func expectedKeys(_ vector: VectorFile) throws -> [KeybagSlot: Data] {
        var keys: [KeybagSlot: Data] = [:]
        for slot in KeybagSlot.allCases {
            let key = try vector.hex(Self.slotField(slot))
            try #require(key.count == 32, "\(Self.slotField(slot)) must be 32 bytes")
            keys[slot] = key
        }
        return keys
    }

    /// The header field holding a slot's expected key.
    private static func slotField(_ slot: KeybagSlot) -> String {
        switch slot {
        case .complete: "key-complete"
        case .completeUnlessOpenSecret: "key-complete-unless-open-secret"
        case .completeUntilFirstUserAuthentication: "key-until-first-auth"
        case .completeWhenUserInactive: "key-when-inactive"
        case .none: "key-none"
        case .metadata: "key-metadata"
        }
    }

    private func withDeviceDirectory(_ body: (URL) throws -> Void) throws {
        let directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("dp-vector-\(UUID().uuidString)", isDirectory: true)
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        try body(directory)
    }

    private func write(_ data: Data, to directory: URL, _ name: String) throws {
        try data.write(to: directory.appendingPathComponent(name))
    }
}

/// What a vector expects.
fileprivate enum Expectation: String, Sendable, CustomStringConvertible {
    case success
    case incorrectPasscode
    case integrityFailure

    /// The error code a failure vector expects.
    var code: DataProtectionError.Code? {
        switch self {
        case .success: nil
        case .incorrectPasscode: .incorrectPasscode
        case .integrityFailure: .integrityFailure
        }
    }

    var description: String { rawValue }
}

/// The keybag and attempt-counter vectors (the file format is ``VectorFile``'s).
fileprivate extension VectorFile {
    enum Kind {
        case keybag
        case attempts
        case device
    }

    static func names(in kind: Kind) -> [String] {
        switch kind {
        case .keybag: names(in: "")
        case .attempts: names(in: "attempts")
        case .device: names(in: "device")
        }
    }

    func expectation() throws -> Expectation {
        let value = try field("expect")
        guard let expectation = Expectation(rawValue: value) else {
            throw FormatError(description: "\(name): unknown expect: \(value)")
        }
        return expectation
    }

    /// The passcode to unlock with; `nil` (a bare unlock) for the empty passcode.
    func passcode() throws -> String? {
        if let text = fields["passcode"] {
            guard fields["passcode-hex"] == nil else { throw FormatError(description: "\(name): two passcode fields") }
            return text.isEmpty ? nil : text
        }
        guard let text = String(data: try hex("passcode-hex"), encoding: .utf8) else {
            throw FormatError(description: "\(name): passcode-hex is not UTF-8")
        }
        return text.isEmpty ? nil : text
    }
}

extension SecureBytes {
    /// Secret bytes from a vector's (public) test data.
    fileprivate static func vector(_ data: Data) -> SecureBytes {
        SecureBytes(count: data.count) { $0.copyBytes(from: data) }
    }

    /// A hash of the bytes, to compare them with a vector's without copying them out.
    fileprivate var fingerprint: Data { BLAKE2b.hash([.secret(self)]) }
}

extension Data {
    /// The hash ``SecureBytes/fingerprint`` gives for these bytes.
    fileprivate var fingerprint: Data { SecureBytes.vector(self).fingerprint }
}
