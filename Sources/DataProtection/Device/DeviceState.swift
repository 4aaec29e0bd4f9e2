/// The lock state of a ``Device``.
public enum DeviceState: String, Sendable, Hashable, CaseIterable, Codable, CustomStringConvertible {
    /// Started and not yet unlocked since boot ("before first unlock").
    case booted
    /// Passcode accepted: every class key is in memory.
    case unlocked
    /// Locked after at least one unlock since boot.
    case locked

    public var description: String { rawValue }
}

/// The protected-data notifications, named as UIKit names them.
public enum DeviceNotification: String, Sendable, Hashable, CaseIterable, Codable, CustomStringConvertible {
    /// Posted by `lock`, before any class key is discarded.
    case protectedDataWillBecomeUnavailable
    /// Posted by `unlock` when the device was not already unlocked.
    case protectedDataDidBecomeAvailable

    public var description: String { rawValue }
}
