/// The standard directories of an iOS app sandbox, inside the store.
public enum SandboxDirectory: String, Sendable, Hashable, CaseIterable {
    /// `Documents`: user data.
    case documents = "Documents"
    /// `Library/Caches`: data that can be recreated.
    case caches = "Library/Caches"
    /// `Library/Application Support`: app data the user does not see.
    case applicationSupport = "Library/Application Support"
    /// `tmp`: scratch files.
    case temporary = "tmp"
}

extension ProtectedStore {
    /// The store path of a standard directory, created (with the default class) on first use.
    @discardableResult
    public func path(for directory: SandboxDirectory) throws(DataProtectionError) -> String {
        try createDirectory(atPath: directory.rawValue, withIntermediateDirectories: true)
        return directory.rawValue
    }
}
