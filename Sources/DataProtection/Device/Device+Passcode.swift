import Foundation
import SodiumBridge

extension Device {
    /// Sets a passcode on a device that has none. Needs the device unlocked.
    ///
    /// Argon2id parameters come from ``DeviceConfiguration/passcodeCost``
    /// (calibrated by default). Class keys are rewrapped; no file is re-encrypted.
    public func setPasscode(_ newPasscode: String) throws(DataProtectionError) {
        transition.lock()
        defer { transition.unlock() }
        expireDue()
        try requireUnlocked()
        guard !hasPasscode else {
            throw .invalidArgument("A passcode is already set.", hint: "Use changePasscode(from:to:) to replace it.")
        }
        try rewrap(newPasscode: try validated(newPasscode))
    }

    /// Replaces the passcode. `oldPasscode` is checked as an attempt (delays,
    /// counting and erase apply). Needs the device unlocked.
    public func changePasscode(from oldPasscode: String, to newPasscode: String) throws(DataProtectionError) {
        transition.lock()
        defer { transition.unlock() }
        expireDue()
        try requireUnlocked()
        let new = try validated(newPasscode)
        try verifyPasscode(SecureBytes(copyingUTF8: oldPasscode)).values.forEach { $0.wipe() }
        try rewrap(newPasscode: new)
    }

    /// Removes the passcode. `oldPasscode` is checked as an attempt. Needs the device unlocked.
    public func removePasscode(_ oldPasscode: String) throws(DataProtectionError) {
        transition.lock()
        defer { transition.unlock() }
        expireDue()
        try requireUnlocked()
        try verifyPasscode(SecureBytes(copyingUTF8: oldPasscode)).values.forEach { $0.wipe() }
        try rewrap(newPasscode: nil)
    }

    private func requireUnlocked() throws(DataProtectionError) {
        guard core.withLock({ $0.state }) == .unlocked else {
            throw .unavailable("Passcode changes need the device unlocked.")
        }
    }

    private func validated(_ passcode: String) throws(DataProtectionError) -> SecureBytes {
        guard !passcode.isEmpty else {
            throw .invalidArgument("The new passcode is empty.", hint: "Use removePasscode(_:) to go without a passcode.")
        }
        guard !passcode.utf8.contains(0) else { throw .invalidArgument("The new passcode contains a NUL character.") }
        return SecureBytes(copyingUTF8: passcode)
    }

    /// Rewraps the passcode-class keys under a new passcode key (or the
    /// no-passcode key) and writes the keybag atomically.
    private func rewrap(newPasscode: SecureBytes?) throws(DataProtectionError) {
        let parameters = newPasscode == nil ? PasscodeParameters.none : try configuration.passcodeCost.parameters()
        let wrappingKey = try hierarchy.passcodeKey(passcode: newPasscode ?? SecureBytes(count: 0), parameters: parameters)
        let (keybag, sealKey) = try core.withLock { core throws(DataProtectionError) -> (Keybag, SecureBytes) in
            var keybag = core.keybag
            keybag.passcode = parameters
            for slot in KeybagSlot.allCases where slot.isPasscodeWrapped {
                guard let key = core.keys.key(slot) else {
                    throw .unavailable("The \(slot.protectionClass!) class key is not in memory.")
                }
                keybag.wrap(key, into: slot, with: wrappingKey)
            }
            return (keybag, core.sealKey)
        }
        try files.writeKeybag(keybag, sealKey: sealKey)
        core.withLock { $0.keybag = keybag }
        logger.debug("passcode changed", metadata: ["passcode": "\(newPasscode == nil ? "removed" : "set")"])
    }

    /// When the next attempt is allowed after `record`; `nil` if no delay applies.
    static func nextAttempt(after record: AttemptRecord) -> DeviceInstant? {
        let delay = PasscodePolicy.delay(afterFailures: Int(record.failures))
        guard delay > .zero, let last = record.lastFailure else { return nil }
        return last + delay
    }

    /// Checks `passcode` as one attempt and returns the passcode-class keys.
    ///
    /// Inside a delay: `passcodeAttemptsDelayed`, not counted. Wrong: counted
    /// (unless it repeats the previous counted wrong passcode), persisted before
    /// the error is returned, and may erase the device. Right: the count resets.
    func verifyPasscode(_ passcode: SecureBytes) throws(DataProtectionError) -> [KeybagSlot: SecureBytes] {
        let now = clock.now
        let (record, keybag) = core.withLock { ($0.attempts, $0.keybag) }
        if let allowed = Self.nextAttempt(after: record), now < allowed {
            let wait = now.duration(to: allowed)
            throw DataProtectionError(
                .passcodeAttemptsDelayed,
                "Too many failed passcode attempts (\(record.failures)): try again in \(wait.formattedForHumans).",
                hint: "Wait until the delay has passed.", retryAfter: wait)
        }
        var keys: [KeybagSlot: SecureBytes] = [:]
        // Without a passcode only the empty passcode is right.
        if keybag.passcode != .none || passcode.count == 0 {
            let wrappingKey = try hierarchy.passcodeKey(passcode: passcode, parameters: keybag.passcode)
            for slot in KeybagSlot.allCases where slot.isPasscodeWrapped {
                guard let key = keybag.unwrap(slot, with: wrappingKey) else { break }
                keys[slot] = key
            }
        }
        guard keys[.complete] != nil else {
            keys.values.forEach { $0.wipe() }
            try recordFailure(passcode, record: record, now: now)
        }
        guard keys.count == 4 else {
            keys.values.forEach { $0.wipe() }
            throw .integrity("The keybag unwraps the class A key but not every other class key: it is corrupt.")
        }
        if record != AttemptRecord() {
            let counterKey = core.withLock { $0.counterKey }
            try files.writeAttempts(AttemptRecord(), macKey: counterKey)
            core.withLock { $0.attempts = AttemptRecord() }
        }
        return keys
    }

    private func recordFailure(_ passcode: SecureBytes, record: AttemptRecord, now: DeviceInstant) throws(DataProtectionError) -> Never {
        let counterKey = core.withLock { $0.counterKey }
        let fingerprint = hierarchy.passcodeFingerprint(passcode, counterKey: counterKey)
        if let previous = record.lastFailedFingerprint, ConstantTime.equals(previous, fingerprint) {
            throw DataProtectionError(.incorrectPasscode, "Incorrect passcode (a repeat of the previous attempt: not counted again).")
        }
        var updated = record
        updated.failures += 1
        updated.lastFailure = now
        updated.lastFailedFingerprint = fingerprint
        // Persist before answering: a failure that could not be recorded is not allowed to count as nothing.
        try files.writeAttempts(updated, macKey: counterKey)
        core.withLock { $0.attempts = updated }
        logger.debug("passcode attempt failed", metadata: ["failures": "\(updated.failures)"])
        if let limit = configuration.eraseAfterFailedAttempts, Int(updated.failures) >= limit {
            try eraseLocked()
            throw DataProtectionError(.deviceErased, "\(updated.failures) failed passcode attempts: the device was erased.")
        }
        let delay = PasscodePolicy.delay(afterFailures: Int(updated.failures))
        throw DataProtectionError(
            .incorrectPasscode, "Incorrect passcode (\(updated.failures) consecutive failed attempts).",
            hint: delay > .zero ? "The next attempt is allowed in \(delay.formattedForHumans)." : nil)
    }
}

extension Duration {
    /// `1 h 5 min`, `30 s`, `250 ms`.
    var formattedForHumans: String {
        let milliseconds = nanoseconds / 1_000_000
        if milliseconds < 1000 { return "\(milliseconds) ms" }
        var seconds = milliseconds / 1000
        var parts: [String] = []
        for (unit, size) in [("h", Int64(3600)), ("min", 60), ("s", 1)] where seconds >= size {
            parts.append("\(seconds / size) \(unit)")
            seconds %= size
        }
        return parts.joined(separator: " ")
    }
}
