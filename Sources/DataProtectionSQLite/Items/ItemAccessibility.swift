import DataProtection

/// When an item's secret can be read: Apple's keychain accessibilities (`kSecAttrAccessible…`),
/// each protected like a file of the matching class (`semantics.md`, "Items (keychain)").
///
/// | accessibility | protected as | while locked | migrates (backups) |
/// |---|---|---|---|
/// | ``whenUnlocked`` | `complete` | no | yes |
/// | ``afterFirstUnlock`` | `completeUntilFirstUserAuthentication` | yes, after the first unlock | yes |
/// | ``whenPasscodeSetThisDeviceOnly`` | `complete`, only while a passcode is set | no | no |
/// | ``whenUnlockedThisDeviceOnly`` | `complete` | no | no |
/// | ``afterFirstUnlockThisDeviceOnly`` | `completeUntilFirstUserAuthentication` | yes, after the first unlock | no |
public enum ItemAccessibility: String, Sendable, Hashable, CaseIterable, Codable {
    /// Readable while the device is unlocked (`kSecAttrAccessibleWhenUnlocked`); the default.
    case whenUnlocked
    /// Readable from the first unlock after a start until the next start
    /// (`kSecAttrAccessibleAfterFirstUnlock`).
    case afterFirstUnlock
    /// Readable while the device is unlocked, and exists only while a passcode is set: adding
    /// one without a passcode fails, removing the passcode (or erase) deletes every one
    /// (`kSecAttrAccessibleWhenPasscodeSetThisDeviceOnly`).
    case whenPasscodeSetThisDeviceOnly
    /// As ``whenUnlocked``, and never in a backup (`kSecAttrAccessibleWhenUnlockedThisDeviceOnly`).
    case whenUnlockedThisDeviceOnly
    /// As ``afterFirstUnlock``, and never in a backup (`kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly`).
    case afterFirstUnlockThisDeviceOnly

    /// The class whose key protects the item.
    public var protectionClass: ProtectionClass {
        switch self {
        case .whenUnlocked, .whenUnlockedThisDeviceOnly, .whenPasscodeSetThisDeviceOnly: .complete
        case .afterFirstUnlock, .afterFirstUnlockThisDeviceOnly: .completeUntilFirstUserAuthentication
        }
    }

    /// Whether the item stays on this device: backups leave it out.
    public var isThisDeviceOnly: Bool {
        switch self {
        case .whenUnlocked, .afterFirstUnlock: false
        case .whenPasscodeSetThisDeviceOnly, .whenUnlockedThisDeviceOnly, .afterFirstUnlockThisDeviceOnly: true
        }
    }

    /// The database the item lives in (`Keys/items.md` §2).
    var domain: ItemDomain {
        switch self {
        case .whenUnlocked, .whenUnlockedThisDeviceOnly: .whenUnlocked
        case .afterFirstUnlock, .afterFirstUnlockThisDeviceOnly: .afterFirstUnlock
        case .whenPasscodeSetThisDeviceOnly: .passcodeBound
        }
    }
}

/// One of the keychain's three item databases: the items one class key protects, with the
/// passcode-bound items apart so that removing them is one atomic step (`Keys/items.md` §2).
enum ItemDomain: String, Sendable, Hashable, CaseIterable {
    case whenUnlocked
    case afterFirstUnlock
    case passcodeBound

    /// The class of the database's files.
    var protectionClass: ProtectionClass {
        self == .afterFirstUnlock ? .completeUntilFirstUserAuthentication : .complete
    }

    /// The accessibilities whose items live here.
    var accessibilities: [ItemAccessibility] {
        ItemAccessibility.allCases.filter { $0.domain == self }
    }

    /// The database's directory in the store.
    var directory: String {
        let name = self == .passcodeBound ? ReservedStoreArea.passcodeBoundDirectory : rawValue
        return "/" + ReservedStoreArea.itemsDirectory + "/" + name
    }

    /// The database's path in the store.
    var databasePath: String { directory + "/items.db" }
}
