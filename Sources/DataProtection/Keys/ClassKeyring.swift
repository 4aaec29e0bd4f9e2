import Foundation
import SodiumBridge

/// The class keys currently in memory.
///
/// Keys are in secure memory; ``discard(_:)`` wipes them at once, whoever
/// else still references the buffers.
struct ClassKeyring: Sendable {
    private(set) var keys: [KeybagSlot: SecureBytes] = [:]

    func key(_ slot: KeybagSlot) -> SecureBytes? { keys[slot] }

    mutating func install(_ key: SecureBytes, in slot: KeybagSlot) {
        if let old = keys[slot], old !== key { old.wipe() }
        keys[slot] = key
    }

    /// Wipes and forgets the keys of `slots`.
    mutating func discard(_ slots: some Sequence<KeybagSlot>) {
        for slot in slots {
            keys.removeValue(forKey: slot)?.wipe()
        }
    }

    /// Wipes and forgets every key.
    mutating func discardAll() { discard(Array(keys.keys)) }
}
