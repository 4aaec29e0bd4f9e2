import Foundation

/// The operations that take long (Argon2id runs for about 100 ms at the calibrated cost),
/// for async code: each runs on a thread of its own, off Swift's cooperative pool, and
/// behaves exactly as its synchronous namesake. In an async context these are the ones
/// called (with `await`).
extension Device {
    /// Unlocks the device, as ``unlock(passcode:)-560gu`` does, off the cooperative pool.
    public func unlock(passcode: Passcode?) async throws(DataProtectionError) {
        try await BlockingCall.run { () throws(DataProtectionError) in try self.unlock(passcode: passcode) }
    }

    /// Unlocks the device with the UTF-8 bytes of `passcode` (`nil`: a bare unlock), off the cooperative pool.
    public func unlock(passcode: String? = nil) async throws(DataProtectionError) {
        try await unlock(passcode: passcode.map(Passcode.init(_:)))
    }

    /// Sets the passcode, as ``setPasscode(_:)-8s9r`` does, off the cooperative pool.
    public func setPasscode(_ newPasscode: Passcode) async throws(DataProtectionError) {
        try await BlockingCall.run { () throws(DataProtectionError) in try self.setPasscode(newPasscode) }
    }

    /// Sets the passcode to the UTF-8 bytes of `newPasscode`, off the cooperative pool.
    public func setPasscode(_ newPasscode: String) async throws(DataProtectionError) {
        try await setPasscode(Passcode(newPasscode))
    }

    /// Changes the passcode, as ``changePasscode(from:to:)-(Passcode,Passcode)`` does, off the cooperative pool.
    public func changePasscode(from oldPasscode: Passcode, to newPasscode: Passcode) async throws(DataProtectionError) {
        try await BlockingCall.run { () throws(DataProtectionError) in try self.changePasscode(from: oldPasscode, to: newPasscode) }
    }

    /// Changes the passcode between the UTF-8 bytes of two strings, off the cooperative pool.
    public func changePasscode(from oldPasscode: String, to newPasscode: String) async throws(DataProtectionError) {
        try await changePasscode(from: Passcode(oldPasscode), to: Passcode(newPasscode))
    }

    /// Removes the passcode, as ``removePasscode(_:)-(Passcode)`` does, off the cooperative pool.
    public func removePasscode(_ oldPasscode: Passcode) async throws(DataProtectionError) {
        try await BlockingCall.run { () throws(DataProtectionError) in try self.removePasscode(oldPasscode) }
    }

    /// Removes the passcode, given as the UTF-8 bytes of `oldPasscode`, off the cooperative pool.
    public func removePasscode(_ oldPasscode: String) async throws(DataProtectionError) {
        try await removePasscode(Passcode(oldPasscode))
    }
}
