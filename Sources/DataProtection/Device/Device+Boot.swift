import Foundation
import Logging
import SodiumBridge

extension Device {
    /// Boots from the device files: loads the keybag, the class D and metadata
    /// keys and the attempt counter. A device without an effaceable key (new,
    /// or interrupted while being erased) is created afresh; an interrupted
    /// rotation of the effaceable key is completed (the slot that does not open
    /// the keybag is wiped in place).
    static func boot(files: DeviceFiles, hierarchy: KeyHierarchy, now: DeviceInstant, logger: Logger) throws(DataProtectionError) -> Core {
        if try files.readErasing() == .effacing {
            // An erase was cut short before the fresh device was made: do it again from the start.
            try files.effaceAll()
            let fresh = try createFresh(files: files, hierarchy: hierarchy, passcode: nil)
            try files.writeErasing(.removingData)
            logger.notice("completed an interrupted erase")
            return fresh
        }
        guard let slots = try files.readEffaceableSlots(), slots.contains(where: { $0 != nil }) else {
            return try createFresh(files: files, hierarchy: hierarchy, passcode: nil)
        }
        var opened: (slot: Int, effaceable: SecureBytes, sealKey: SecureBytes, keybag: Keybag)?
        for (index, candidate) in slots.enumerated() {
            guard let candidate else { continue }
            let sealKey = try hierarchy.sealKey(effaceable: candidate)
            if opened == nil, let keybag = try? files.readKeybag(sealKey: sealKey) {
                opened = (index, candidate, sealKey, keybag)
            }
        }
        guard let opened else {
            // The first present key's error says why (missing, tampered, another device's).
            let first = slots.compactMap { $0 }[0]
            _ = try files.readKeybag(sealKey: hierarchy.sealKey(effaceable: first))
            throw .integrity("The keybag does not open with the effaceable key.")
        }
        for (index, candidate) in slots.enumerated() where index != opened.slot && candidate != nil {
            // A rotation stopped between its new keybag and the wipe of the old key: finish it.
            try files.overwriteEffaceableSlot(index, with: nil)
            logger.notice("completed an interrupted rotation of the effaceable key")
        }
        let counterKey = try hierarchy.attemptCounterKey()
        var attempts: AttemptRecord
        if let stored = try files.readAttempts(macKey: counterKey) {
            attempts = stored
        } else {
            // A deleted or edited counter must never reset the delay.
            attempts = .punitive(at: now)
            logger.warning("the passcode attempt counter is missing or does not authenticate; applying the longest delay")
            try files.writeAttempts(attempts, macKey: counterKey)
        }
        var core = Core(effaceable: opened.effaceable, effaceableSlot: opened.slot, sealKey: opened.sealKey,
                        counterKey: counterKey, keybag: opened.keybag, attempts: attempts)
        try loadDeviceOnlyKeys(into: &core, hierarchy: hierarchy)
        return core
    }

    /// Creates a new keybag with fresh class keys and writes the device files (the
    /// effaceable key last: it commits the creation). With `passcode`, the keybag is
    /// the passcode's from the start: no keybag that opens without it is ever written.
    static func createFresh(
        files: DeviceFiles, hierarchy: KeyHierarchy, passcode: (SecureBytes, PasscodeParameters)?
    ) throws(DataProtectionError) -> Core {
        let effaceable = SecureBytes.random(count: 32)
        let sealKey = try hierarchy.sealKey(effaceable: effaceable)
        let counterKey = try hierarchy.attemptCounterKey()
        let (publicKey, classBSecret) = X25519.generateKeyPair()
        let parameters = passcode?.1 ?? .none
        var keybag = Keybag(id: Random.bytes(count: Keybag.idByteCount), passcode: parameters, classBPublicKey: publicKey, slots: [:])
        let passcodeKey = try hierarchy.passcodeKey(passcode: passcode?.0 ?? SecureBytes(count: 0), parameters: parameters,
                                                    creating: true)
        defer { passcodeKey.wipe() }
        let deviceOnlyKey = try hierarchy.deviceOnlyKey()
        for slot in KeybagSlot.allCases {
            let key = slot == .completeUnlessOpenSecret ? classBSecret : SecureBytes.random(count: 32)
            keybag.wrap(key, into: slot, with: slot.isPasscodeWrapped ? passcodeKey : deviceOnlyKey)
            key.wipe()
        }
        try files.writeKeybag(keybag, sealKey: sealKey)
        try files.writeAttempts(AttemptRecord(), macKey: counterKey)
        try files.createEffaceableFile(effaceable)
        // TPM passcode objects of keybags that no longer exist (an erase) are forgotten.
        try? hierarchy.retainPasscodeBinding(for: parameters)
        var core = Core(effaceable: effaceable, effaceableSlot: 0, sealKey: sealKey, counterKey: counterKey,
                        keybag: keybag, attempts: AttemptRecord())
        try loadDeviceOnlyKeys(into: &core, hierarchy: hierarchy)
        return core
    }

    /// Unwraps the class D and metadata keys, available from boot.
    private static func loadDeviceOnlyKeys(into core: inout Core, hierarchy: KeyHierarchy) throws(DataProtectionError) {
        let deviceOnlyKey = try hierarchy.deviceOnlyKey()
        for slot in [KeybagSlot.none, .metadata] {
            guard let key = core.keybag.unwrap(slot, with: deviceOnlyKey) else {
                throw .integrity("The keybag's device-only keys do not unwrap: it belongs to another device key.",
                                 hint: "Restore the device directory from a backup, or erase the device (all data is lost).")
            }
            core.keys.install(key, in: slot)
        }
    }
}
