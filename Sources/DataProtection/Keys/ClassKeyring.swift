import Foundation
import SodiumBridge

/// The class keys currently in memory.
///
/// Keys are in secure memory; ``discard(_:)`` wipes them at once, whoever
/// else still references the buffers.
struct ClassKeyring: Sendable {
    /// Indexed by the slot's raw value: a class check (at each SQLite write, each transaction)
    /// costs an index, not a hash.
    private var keys = [SecureBytes?](repeating: nil, count: Int(KeybagSlot.allCases.map(\.rawValue).max()!) + 1)
    /// Keys derived from a slot's key (by label), kept while that key is: deriving them
    /// costs a secure allocation each, and names are encrypted at every path lookup.
    private var derived: [KeybagSlot: [String: SecureBytes]] = [:]

    func key(_ slot: KeybagSlot) -> SecureBytes? { keys[Int(slot.rawValue)] }

    mutating func install(_ key: SecureBytes, in slot: KeybagSlot) {
        if let old = keys[Int(slot.rawValue)], old !== key {
            old.wipe()
            forgetDerived(slot)
        }
        keys[Int(slot.rawValue)] = key
        SecretRecorder.record(key, "class key \(slot)")  // inert unless a key-hygiene test records
    }

    /// The key derived from `slot`'s key for `label` (derived by `derive` on first use), or `nil`
    /// when the slot holds no key. Wiped with the slot's key.
    mutating func derivedKey(_ slot: KeybagSlot, label: String, _ derive: (SecureBytes) -> SecureBytes) -> SecureBytes? {
        guard let key = keys[Int(slot.rawValue)] else { return nil }
        if let cached = derived[slot]?[label] { return cached }
        let fresh = derive(key)
        derived[slot, default: [:]][label] = fresh
        return fresh
    }

    /// Wipes and forgets the keys of `slots`.
    mutating func discard(_ slots: some Sequence<KeybagSlot>) {
        for slot in slots {
            keys[Int(slot.rawValue)]?.wipe()
            keys[Int(slot.rawValue)] = nil
            forgetDerived(slot)
        }
    }

    private mutating func forgetDerived(_ slot: KeybagSlot) {
        for key in (derived.removeValue(forKey: slot) ?? [:]).values { key.wipe() }
    }

    /// Wipes and forgets every key.
    mutating func discardAll() { discard(KeybagSlot.allCases) }
}
