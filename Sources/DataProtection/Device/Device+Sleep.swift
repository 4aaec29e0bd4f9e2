extension Device {
    /// Locks the device with no grace period, as before the machine sleeps: posts
    /// ``DeviceNotification/protectedDataWillBecomeUnavailable`` if it was unlocked, then
    /// discards the class A and B secret keys at once, also those of a lock still inside its
    /// grace period (open handles are flushed first, as at any discard). The class CX key keeps
    /// its inactivity period. Does nothing before the first unlock.
    public func lockDiscardingKeys() throws(DataProtectionError) {
        transition.lock()
        defer { transition.unlock() }
        try lock()
        let now = clock.now
        core.withLock { core in
            guard core.state == .locked else { return }
            for slot in [KeybagSlot.complete, .completeUnlessOpenSecret] where core.deadlines[slot] != nil {
                core.deadlines[slot] = now
            }
        }
        expireDue()
    }
}
