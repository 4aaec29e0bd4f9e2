import Foundation
import Testing
@testable import DataProtection

/// semantics.md, "Device states": the transitions of `lock` and `unlock`.
@Suite("Device states")
struct DeviceStateTests {
    @Test("a new device is booted")
    func newDeviceIsBooted() throws {
        try withDevice { fixture in
            #expect(fixture.device.state == .booted)
            #expect(!fixture.device.hasPasscode)
            #expect(fixture.device.failedPasscodeAttempts == 0)
            #expect(fixture.device.nextPasscodeAttemptAllowed == nil)
        }
    }

    @Test("unlock moves booted to unlocked")
    func unlockFromBooted() throws {
        try withDevice(passcode: "1234") { fixture in
            try fixture.device.reboot()
            #expect(fixture.device.state == .booted)
            try fixture.device.unlock(passcode: "1234")
            #expect(fixture.device.state == .unlocked)
        }
    }

    @Test("lock moves unlocked to locked")
    func lockFromUnlocked() throws {
        try withDevice(passcode: "1234") { fixture in
            try fixture.device.lock()
            #expect(fixture.device.state == .locked)
        }
    }

    @Test("unlock moves locked to unlocked")
    func unlockFromLocked() throws {
        try withDevice(passcode: "1234") { fixture in
            try fixture.device.lock()
            try fixture.device.unlock(passcode: "1234")
            #expect(fixture.device.state == .unlocked)
        }
    }

    @Test("lock when booted changes nothing and posts nothing")
    func lockWhenBooted() throws {
        try withDevice(passcode: "1234") { fixture in
            try fixture.device.reboot()
            let recorder = DeviceEventRecorder(fixture.device)
            try fixture.device.lock()
            #expect(fixture.device.state == .booted)
            #expect(recorder.events.isEmpty)
            #expect(fixture.device.isAvailable(.none))
            #expect(!fixture.device.isAvailable(.completeUntilFirstUserAuthentication))
        }
    }

    @Test("lock when locked changes nothing, posts nothing and does not move the grace deadline")
    func lockWhenLocked() throws {
        try withDevice(.testing(grace: .seconds(10)), passcode: "1234") { fixture in
            try fixture.device.lock()
            fixture.clock.advance(by: .seconds(5))
            let recorder = DeviceEventRecorder(fixture.device)
            try fixture.device.lock()
            #expect(fixture.device.state == .locked)
            #expect(recorder.events.isEmpty)
            fixture.clock.advance(by: .seconds(5))
            #expect(!fixture.device.isProtectedDataAvailable, "the second lock restarted the grace period")
        }
    }

    @Test("unlock when unlocked changes nothing and posts nothing")
    func unlockWhenUnlocked() throws {
        try withDevice(passcode: "1234") { fixture in
            let before = fixture.fingerprints()
            let recorder = DeviceEventRecorder(fixture.device)
            try fixture.device.unlock(passcode: "1234")
            #expect(fixture.device.state == .unlocked)
            #expect(recorder.events.isEmpty)
            #expect(fixture.fingerprints() == before)
        }
    }

    @Test("a wrong passcode leaves the state as it was", arguments: [DeviceState.booted, .unlocked, .locked])
    func wrongPasscodeKeepsState(_ state: DeviceState) throws {
        try withDevice(passcode: "1234") { fixture in
            switch state {
            case .booted: try fixture.device.reboot()
            case .unlocked: break
            case .locked: try fixture.device.lock()
            }
            let recorder = DeviceEventRecorder(fixture.device)
            expectError(.incorrectPasscode) { try fixture.device.unlock(passcode: "0000") }
            #expect(fixture.device.state == state)
            #expect(recorder.events.isEmpty)
        }
    }

    @Test("a device without a passcode unlocks with a bare unlock")
    func bareUnlockWithoutPasscode() throws {
        try withDevice { fixture in
            try fixture.device.unlock()
            #expect(fixture.device.state == .unlocked)
            try fixture.device.lock()
            try fixture.device.unlock(passcode: "")
            #expect(fixture.device.state == .unlocked)
        }
    }
}
