import Foundation
import Testing
@testable import DataProtection

/// semantics.md, "Keys" (erase destroys the effaceable key) and "Passcode
/// attempts" (erase after N failures).
@Suite("Erase")
struct EraseTests {
    /// Checks that the device is fresh: booted, no passcode, no failures, and
    /// after a bare unlock every key differs from `old`.
    static func expectFresh(_ fixture: DeviceFixture, comparedWith old: [KeybagSlot: Data],
                            sourceLocation: SourceLocation = #_sourceLocation) throws {
        let device = fixture.device
        #expect(device.state == .booted, sourceLocation: sourceLocation)
        #expect(!device.hasPasscode, sourceLocation: sourceLocation)
        #expect(device.failedPasscodeAttempts == 0, sourceLocation: sourceLocation)
        #expect(device.nextPasscodeAttemptAllowed == nil, sourceLocation: sourceLocation)
        try device.unlock()
        let new = fixture.fingerprints()
        #expect(new.count == KeybagSlot.allCases.count, sourceLocation: sourceLocation)
        for slot in KeybagSlot.allCases {
            #expect(new[slot] != nil && new[slot] != old[slot], "\(slot) survived the erase", sourceLocation: sourceLocation)
        }
    }

    @Test("erase returns the device to a fresh state with new keys", arguments: [DeviceState.booted, .unlocked, .locked])
    func eraseFromState(_ state: DeviceState) throws {
        try withDevice(passcode: "1234") { fixture in
            let old = fixture.fingerprints()
            try fixture.device.lock()
            fixture.fail(3)
            switch state {
            case .booted: try fixture.device.reboot()
            case .locked: break
            case .unlocked: try fixture.device.unlock(passcode: "1234")
            }
            try fixture.device.erase()
            try Self.expectFresh(fixture, comparedWith: old)
        }
    }

    @Test("erase resets the failure count and any delay")
    func eraseResetsDelay() throws {
        try withDevice(passcode: "1234") { fixture in
            try fixture.device.lock()
            fixture.fail(9)
            #expect(fixture.device.nextPasscodeAttemptAllowed != nil)
            try fixture.device.erase()
            #expect(fixture.device.failedPasscodeAttempts == 0)
            #expect(fixture.device.nextPasscodeAttemptAllowed == nil)
            try fixture.device.unlock()
        }
    }

    @Test("an erased device stays erased after a process restart")
    func erasePersists() throws {
        try withDevice(passcode: "1234") { fixture in
            let old = fixture.fingerprints()
            try fixture.device.erase()
            try fixture.reopen()
            try Self.expectFresh(fixture, comparedWith: old)
        }
    }

    @Test("the old keybag cannot be opened with the new effaceable key; the new one can")
    func oldKeybagUnopenable() throws {
        try withDevice(passcode: "1234") { fixture in
            let oldKeybag = try Data(contentsOf: fixture.file("keybag"))
            let oldEffaceable = try #require(try fixture.device.files.readEffaceableKey())
            // The old keybag opens with the old effaceable key: the effaceable key is what matters.
            #expect(throws: Never.self) {
                try Keybag.open(file: oldKeybag, sealKey: try fixture.device.hierarchy.sealKey(effaceable: oldEffaceable))
            }

            try fixture.device.erase()

            let newEffaceable = try #require(try fixture.device.files.readEffaceableKey())
            #expect(!newEffaceable.constantTimeEquals(oldEffaceable))
            let newSeal = try fixture.device.hierarchy.sealKey(effaceable: newEffaceable)
            expectError(.integrityFailure) { _ = try Keybag.open(file: oldKeybag, sealKey: newSeal) }
            let newKeybag = try Data(contentsOf: fixture.file("keybag"))
            #expect(newKeybag != oldKeybag)
            let opened = try Keybag.open(file: newKeybag, sealKey: newSeal)
            #expect(opened.passcode == .none)

            // Putting the old keybag back does not bring the old device back.
            try oldKeybag.write(to: fixture.file("keybag"))
            let error = #expect(throws: DataProtectionError.self) { try fixture.reopen() }
            #expect(error?.code == .integrityFailure)
        }
    }

    @Test("the attempt that reaches N erases the device and fails with deviceErased", arguments: [1, 2, 5, 10])
    func eraseAfterFailures(_ limit: Int) throws {
        try withDevice(.testing(eraseAfter: limit), passcode: "1234") { fixture in
            let old = fixture.fingerprints()
            try fixture.device.lock()
            let recorder = DeviceEventRecorder(fixture.device)
            fixture.fail(limit - 1)
            #expect(fixture.device.failedPasscodeAttempts == limit - 1)
            #expect(fixture.device.hasPasscode)
            fixture.waitForNextAttempt()
            expectError(.deviceErased) { try fixture.device.unlock(passcode: "the last wrong one") }
            #expect(recorder.events.last == .willErase)
            #expect(recorder.notifications == [])
            try Self.expectFresh(fixture, comparedWith: old)
        }
    }

    @Test("a repeated wrong passcode does not bring the erase closer")
    func repeatDoesNotCountTowardErase() throws {
        try withDevice(.testing(eraseAfter: 2), passcode: "1234") { fixture in
            try fixture.device.lock()
            for _ in 0..<5 {
                expectError(.incorrectPasscode) { try fixture.device.unlock(passcode: "0000") }
            }
            #expect(fixture.device.failedPasscodeAttempts == 1)
            #expect(fixture.device.hasPasscode)
            try fixture.device.unlock(passcode: "1234")
        }
    }

    @Test("a passcode change whose old passcode reaches N erases the device",
          arguments: ["change", "remove"])
    func passcodeChangeErases(_ operation: String) throws {
        try withDevice(.testing(eraseAfter: 3), passcode: "1234") { fixture in
            let old = fixture.fingerprints()
            fixture.fail(2)
            expectError(.deviceErased) {
                if operation == "change" {
                    try fixture.device.changePasscode(from: "9999", to: "5678")
                } else {
                    try fixture.device.removePasscode("9999")
                }
            }
            try Self.expectFresh(fixture, comparedWith: old)
        }
    }

    @Test("erase after N counts failures across process restarts")
    func eraseCountsAcrossRestarts() throws {
        try withDevice(.testing(eraseAfter: 3), passcode: "1234") { fixture in
            let old = fixture.fingerprints()
            fixture.fail(2)
            try fixture.reopen()
            expectError(.deviceErased) { try fixture.device.unlock(passcode: "0000") }
            try Self.expectFresh(fixture, comparedWith: old)
        }
    }
}
