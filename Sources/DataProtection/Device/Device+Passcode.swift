import Foundation
import SodiumBridge

extension Device {
    /// Sets a passcode on a device that has none. Needs the device unlocked.
    ///
    /// Argon2id parameters come from ``DeviceConfiguration/passcodeCost``
    /// (calibrated by default). Class keys are rewrapped; no file is re-encrypted.
    ///
    /// - Throws: ``DataProtectionError/Code/invalidArgument`` for an empty passcode or one
    ///   with a NUL byte, or when a passcode is set already.
    public func setPasscode(_ newPasscode: Passcode) throws(DataProtectionError) {
        let new = try Self.validated(newPasscode)
        transition.lock()
        defer { transition.unlock() }
        expireDue()
        try requireUnlocked()
        guard !hasPasscode else {
            throw .invalidArgument("A passcode is already set.", hint: "Use changePasscode(from:to:) to replace it.")
        }
        try rewrap(newPasscode: new, parameters: try configuration.passcodeCost.parameters())
    }

    /// Sets the UTF-8 bytes of `newPasscode` as the passcode (see the `Passcode` overload).
    public func setPasscode(_ newPasscode: String) throws(DataProtectionError) {
        try setPasscode(Passcode(newPasscode))
    }

    /// Replaces the passcode. `oldPasscode` is checked as an attempt (delays,
    /// counting and erase apply). Needs the device unlocked.
    public func changePasscode(from oldPasscode: Passcode, to newPasscode: Passcode) throws(DataProtectionError) {
        let new = try Self.validated(newPasscode)
        transition.lock()
        defer { transition.unlock() }
        expireDue()
        try requireUnlocked()
        try verifyPasscode(oldPasscode.bytes).values.forEach { $0.wipe() }
        // Calibration (a few hundred ms) runs after the check, so a wrong old passcode costs nothing more.
        try rewrap(newPasscode: new, parameters: try configuration.passcodeCost.parameters())
    }

    /// Replaces the passcode, both given as the UTF-8 bytes of a `String`.
    public func changePasscode(from oldPasscode: String, to newPasscode: String) throws(DataProtectionError) {
        try changePasscode(from: Passcode(oldPasscode), to: Passcode(newPasscode))
    }

    /// Removes the passcode. `oldPasscode` is checked as an attempt. Needs the device unlocked.
    public func removePasscode(_ oldPasscode: Passcode) throws(DataProtectionError) {
        transition.lock()
        defer { transition.unlock() }
        expireDue()
        try requireUnlocked()
        try verifyPasscode(oldPasscode.bytes).values.forEach { $0.wipe() }
        // Passcode-bound items (`whenPasscodeSetThisDeviceOnly`) go first: should the rewrap
        // then fail, the passcode stays and the items are gone, never the other way round.
        for observer in lifecycleObservers() {
            observer.deviceWillRemovePasscode()
        }
        try rewrap(newPasscode: nil, parameters: .none)
    }

    /// Removes the passcode, given as the UTF-8 bytes of a `String`.
    public func removePasscode(_ oldPasscode: String) throws(DataProtectionError) {
        try removePasscode(Passcode(oldPasscode))
    }

    private func requireUnlocked() throws(DataProtectionError) {
        guard core.withLock({ $0.state }) == .unlocked else {
            throw .unavailable("Passcode changes need the device unlocked.")
        }
    }

    /// The bytes of a new passcode, refused when empty or with a NUL byte (`Keys/key-hierarchy.md` §8.1).
    static func validated(_ passcode: Passcode) throws(DataProtectionError) -> SecureBytes {
        guard passcode.byteCount > 0 else {
            throw .invalidArgument("The new passcode is empty.", hint: "To go without a passcode, remove it instead (`dpctl passcode remove`, or Device.removePasscode(_:)).")
        }
        guard !passcode.bytes.withUnsafeBytes({ $0.contains(0) }) else { throw .invalidArgument("The new passcode contains a NUL byte.") }
        return passcode.bytes
    }

    /// Rewraps the passcode-class keys under a new passcode key (or the
    /// no-passcode key) and rotates the effaceable key (`Keys/key-hierarchy.md` §8.6):
    ///
    /// 1. a new effaceable key goes into the free slot, in place and durably (the
    ///    current keybag still opens with the current key);
    /// 2. the new keybag, sealed under the new key, replaces the old atomically;
    /// 3. the old key is overwritten with zeros in place: every keybag ever sealed
    ///    under it (freed blocks, backups, snapshots) opens nothing any more.
    ///
    /// A crash at any instant leaves one keybag that opens with one slot; the next
    /// boot wipes the other slot (completing step 3).
    private func rewrap(newPasscode: SecureBytes?, parameters: PasscodeParameters) throws(DataProtectionError) {
        let wrappingKey = try hierarchy.passcodeKey(passcode: newPasscode ?? SecureBytes(count: 0), parameters: parameters,
                                                    creating: true)
        defer { wrappingKey.wipe() }
        let (keybag, currentSlot) = try core.withLock { core throws(DataProtectionError) -> (Keybag, Int) in
            var keybag = core.keybag
            keybag.passcode = parameters
            for slot in KeybagSlot.allCases where slot.isPasscodeWrapped {
                guard let key = core.keys.key(slot) else {
                    throw .unavailable("The \(slot.protectionClass!) class key is not in memory.")
                }
                keybag.wrap(key, into: slot, with: wrappingKey)
            }
            return (keybag, core.effaceableSlot)
        }
        let nextSlot = 1 - currentSlot
        let next = SecureBytes.random(count: 32)
        let nextSealKey = try hierarchy.sealKey(effaceable: next)
        try files.overwriteEffaceableSlot(nextSlot, with: next)
        if files.effaceableNV != nil { TPMCrashPoint.reach(.rotationSlotWritten) }
        do {
            try files.writeKeybag(keybag, sealKey: nextSealKey)
            if files.effaceableNV != nil { TPMCrashPoint.reach(.keybagWritten) }
        } catch {
            // The write may have failed after its rename (directory fsync): go on only if the
            // disk now holds the new keybag; else the old one stands (boot wipes the new slot).
            guard (try? files.readKeybag(sealKey: nextSealKey)) != nil else { throw error }
        }
        let old = core.withLock { core -> SecureBytes in
            let old = core.effaceable
            core.keybag = keybag
            core.effaceable = next
            core.effaceableSlot = nextSlot
            core.sealKey = nextSealKey
            return old
        }
        old.wipe()
        // The new keybag stands: the TPM passcode object of the old one goes (should this fail, the next change drops it).
        try? hierarchy.retainPasscodeBinding(for: parameters)
        logger.debug("passcode changed", metadata: ["action": "\(newPasscode == nil ? "removed" : "set")"])
        // The change is in effect; should the wipe fail, the next boot completes it.
        try files.overwriteEffaceableSlot(currentSlot, with: nil)
    }

    /// When the next attempt is allowed after `record`; `nil` if no delay applies.
    static func nextAttempt(after record: AttemptRecord) -> DeviceInstant? {
        let delay = PasscodePolicy.delay(afterFailures: Int(record.failures))
        guard delay > .zero, let last = record.lastFailure else { return nil }
        return last + delay
    }

    /// Checks `passcode` as one attempt and returns the passcode-class keys.
    ///
    /// Inside a delay: `passcodeAttemptsDelayed`, not counted. Otherwise the
    /// attempt is counted on disk *before* the check, so a process killed during
    /// the check has spent it. Wrong: stays counted (unless it repeats the
    /// previous counted wrong passcode, which is given back), and may erase the
    /// device. Right: the count resets.
    func verifyPasscode(_ passcode: SecureBytes) throws(DataProtectionError) -> [KeybagSlot: SecureBytes] {
        if let broken = core.withLock({ $0.needsReboot }) { throw broken }
        let now = clock.now
        let record = try loadAttempts(now: now)
        // A count already at the limit means the attempt that reached it was recorded but
        // its erase did not complete (a power cut): finish the erase before anything else,
        // or cutting the power at the right moment would buy unlimited guesses.
        if let limit = configuration.eraseAfterFailedAttempts, Int(record.failures) >= limit {
            try eraseLocked()
            throw DataProtectionError(.deviceErased, "\(record.failures) failed passcode attempts: the device was erased.")
        }
        if let allowed = Self.nextAttempt(after: record), now < allowed {
            let wait = now.duration(to: allowed)
            throw DataProtectionError(
                .passcodeAttemptsDelayed,
                "Too many failed passcode attempts (\(record.failures)): try again in \(wait.formattedForHumans).",
                hint: "Wait until the delay has passed.", retryAfter: wait)
        }
        var pending = record
        pending.failures = record.failures == .max ? .max : record.failures + 1
        pending.lastFailure = now
        // Durable before the verdict: cutting the power after seeing the answer must not refund the attempt.
        try storeAttempts(pending, durable: true)

        let keybag = core.withLock { $0.keybag }
        // Without a passcode only the empty passcode is right: nothing to derive otherwise.
        let wrappingKey: SecureBytes?
        do {
            wrappingKey = keybag.passcode != .none || passcode.count == 0
                ? try hierarchy.passcodeKey(passcode: passcode, parameters: keybag.passcode) : nil
        } catch where error.code == .passcodeAttemptsDelayed || error.code == .ioFailure {
            // The TPM is in lockout, or cannot be reached: nothing was tried, nothing is counted.
            try storeAttempts(record, advance: false)
            throw error
        }
        if let wrappingKey, let complete = keybag.unwrap(.complete, with: wrappingKey) {
            var keys: [KeybagSlot: SecureBytes] = [.complete: complete]
            for slot in KeybagSlot.allCases where slot.isPasscodeWrapped && slot != .complete {
                guard let key = keybag.unwrap(slot, with: wrappingKey) else {
                    keys.values.forEach { $0.wipe() }
                    try storeAttempts(record, advance: false)  // the passcode was right: nothing to count
                    throw .integrity("The keybag unwraps the class A key but not the \(slot.protectionClass!) key: it is corrupt.")
                }
                keys[slot] = key
            }
            // Class B files created while locked must be reopenable: the public half must match the secret.
            guard X25519.publicKey(for: keys[.completeUnlessOpenSecret]!) == keybag.classBPublicKey else {
                keys.values.forEach { $0.wipe() }
                try storeAttempts(record, advance: false)
                throw .integrity("The keybag's class B public key does not match its secret key: it is corrupt.")
            }
            try storeAttempts(AttemptRecord(), advance: false)
            return keys
        }
        if keybag.passcode == .none, passcode.count == 0 {
            // The only right answer did not unwrap: the keybag is corrupt, not the attempt wrong.
            try storeAttempts(record, advance: false)
            throw .integrity("The keybag's class keys do not unwrap without a passcode: it is corrupt.")
        }
        let fingerprint = try hierarchy.passcodeFingerprint(wrappingKey.map { .derivedKey($0) } ?? .passcode(passcode))
        // The previous wrong attempt may predate the passcode (set since, with a salt of its
        // own): it was fingerprinted as FP'(P) then. Compared, never stored (key-hierarchy.md §8.5).
        let rawFingerprint = wrappingKey != nil ? try hierarchy.passcodeFingerprint(.passcode(passcode)) : nil
        if let previous = record.lastFailedFingerprint,
           ConstantTime.equals(previous, fingerprint) || rawFingerprint.map({ ConstantTime.equals(previous, $0) }) == true {
            try storeAttempts(record, advance: false)
            throw DataProtectionError(.incorrectPasscode, "Incorrect passcode (a repeat of the previous attempt: not counted again).")
        }
        pending.lastFailedFingerprint = fingerprint
        try storeAttempts(pending, advance: false)
        logger.debug("passcode attempt failed", metadata: ["failures": "\(pending.failures)"])
        if let limit = configuration.eraseAfterFailedAttempts, Int(pending.failures) >= limit {
            try eraseLocked()
            throw DataProtectionError(.deviceErased, "\(pending.failures) failed passcode attempts: the device was erased.")
        }
        let delay = PasscodePolicy.delay(afterFailures: Int(pending.failures))
        throw DataProtectionError(
            .incorrectPasscode, "Incorrect passcode (\(pending.failures) consecutive failed attempts).",
            hint: delay > .zero ? "The next attempt is allowed in \(delay.formattedForHumans)." : nil)
    }

    /// The attempt record as stored: the file is authoritative (another process may
    /// have counted attempts); a missing or forged file means the longest delay.
    private func loadAttempts(now: DeviceInstant) throws(DataProtectionError) -> AttemptRecord {
        let counterKey = core.withLock { $0.counterKey }
        if let stored = try files.readAttempts(macKey: counterKey) {
            core.withLock { $0.attempts = stored }
            return stored
        }
        logger.warning("the passcode attempt counter is missing or does not authenticate; applying the longest delay")
        let punitive = AttemptRecord.punitive(at: now)
        try storeAttempts(punitive, durable: true)
        return punitive
    }

    /// Writes the record. Only the increment before a verdict must be durable (directory
    /// `fsync` too): a later write lost to a power cut leaves that increment, a count
    /// higher than the truth, never lower; file data is always `fsync`ed, so never torn.
    ///
    /// On a TPM device every write but the verdict after a pending record (`advance` false: the
    /// same counter value, no TPM command) advances the TPM's counter (key-hierarchy.md §4.4.4).
    private func storeAttempts(_ record: AttemptRecord, durable: Bool = false, advance: Bool = true) throws(DataProtectionError) {
        let counterKey = core.withLock { $0.counterKey }
        try files.writeAttempts(record, macKey: counterKey, durable: durable, advance: advance)
        core.withLock { $0.attempts = record }
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
