import Foundation
import Logging
import SodiumBridge

extension Device {
    /// Boots from the device files: loads the keybag, the class D and metadata
    /// keys and the attempt counter. A device without an effaceable key (new,
    /// or interrupted while being erased) is created afresh.
    static func boot(files: DeviceFiles, hierarchy: KeyHierarchy, now: DeviceInstant, logger: Logger) throws(DataProtectionError) -> Core {
        guard let effaceable = try files.readEffaceableKey() else {
            return try createFresh(files: files, hierarchy: hierarchy)
        }
        let sealKey = hierarchy.sealKey(effaceable: effaceable)
        effaceable.wipe()
        let keybag = try files.readKeybag(sealKey: sealKey)
        let counterKey = hierarchy.attemptCounterKey()
        var attempts: AttemptRecord
        if let stored = try files.readAttempts(macKey: counterKey) {
            attempts = stored
        } else {
            // A deleted or edited counter must never reset the delay.
            attempts = .punitive(at: now)
            logger.warning("the passcode attempt counter is missing or does not authenticate; applying the longest delay")
            try files.writeAttempts(attempts, macKey: counterKey)
        }
        var core = Core(sealKey: sealKey, counterKey: counterKey, keybag: keybag, attempts: attempts)
        try loadDeviceOnlyKeys(into: &core, hierarchy: hierarchy)
        return core
    }

    /// Creates a new keybag with fresh class keys and no passcode, and writes
    /// the device files (the effaceable key last: it commits the creation).
    static func createFresh(files: DeviceFiles, hierarchy: KeyHierarchy) throws(DataProtectionError) -> Core {
        let effaceable = SecureBytes.random(count: 32)
        defer { effaceable.wipe() }
        let sealKey = hierarchy.sealKey(effaceable: effaceable)
        let counterKey = hierarchy.attemptCounterKey()
        let (publicKey, classBSecret) = X25519.generateKeyPair()
        var keybag = Keybag(id: Random.bytes(count: Keybag.idByteCount), passcode: .none, classBPublicKey: publicKey, slots: [:])
        let passcodeKey = try hierarchy.passcodeKey(passcode: SecureBytes(count: 0), parameters: .none)
        let deviceOnlyKey = hierarchy.deviceOnlyKey()
        for slot in KeybagSlot.allCases {
            let key = slot == .completeUnlessOpenSecret ? classBSecret : SecureBytes.random(count: 32)
            keybag.wrap(key, into: slot, with: slot.isPasscodeWrapped ? passcodeKey : deviceOnlyKey)
            key.wipe()
        }
        try files.writeKeybag(keybag, sealKey: sealKey)
        try files.writeAttempts(AttemptRecord(), macKey: counterKey)
        try files.writeEffaceableKey(effaceable)
        var core = Core(sealKey: sealKey, counterKey: counterKey, keybag: keybag, attempts: AttemptRecord())
        try loadDeviceOnlyKeys(into: &core, hierarchy: hierarchy)
        return core
    }

    /// Unwraps the class D and metadata keys, available from boot.
    private static func loadDeviceOnlyKeys(into core: inout Core, hierarchy: KeyHierarchy) throws(DataProtectionError) {
        let deviceOnlyKey = hierarchy.deviceOnlyKey()
        for slot in [KeybagSlot.none, .metadata] {
            guard let key = core.keybag.unwrap(slot, with: deviceOnlyKey) else {
                throw .integrity("The keybag's device-only keys do not unwrap: it belongs to another device key.",
                                 hint: "Restore the device directory from a backup, or erase the device (all data is lost).")
            }
            core.keys.install(key, in: slot)
        }
    }
}
