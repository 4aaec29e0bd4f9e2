import Foundation
import Testing
@testable import DataProtection

@Test func smoke() throws {
    let dir = FileManager.default.temporaryDirectory.appendingPathComponent("dp-smoke-\(UUID())")
    defer { try? FileManager.default.removeItem(at: dir) }
    let clock = VirtualClock()
    let device = try Device(directory: dir, clock: clock, configuration: .init(gracePeriod: .seconds(10), passcodeCost: .minimal))
    #expect(device.state == .booted)
    #expect(device.isAvailable(.none))
    #expect(!device.isAvailable(.complete))
    try device.unlock()
    #expect(device.isProtectedDataAvailable)
    try device.setPasscode("1234")
    device.lock()
    #expect(device.isProtectedDataAvailable)
    clock.advance(by: .seconds(10))
    #expect(!device.isProtectedDataAvailable)
    #expect(device.isAvailable(.completeUntilFirstUserAuthentication))
    #expect(throws: DataProtectionError.self) { try device.unlock(passcode: "0000") }
    #expect(device.failedPasscodeAttempts == 1)
    try device.unlock(passcode: "1234")
    #expect(device.failedPasscodeAttempts == 0)
    try device.reboot()
    #expect(device.state == .booted)
    let again = try Device(directory: dir, clock: clock, configuration: .init(passcodeCost: .minimal))
    try again.unlock(passcode: "1234")
    #expect(again.isProtectedDataAvailable)
}
