import DataProtection
import Foundation

/// What the keychain holds about an item, without its secret (read the secret with
/// ``Keychain/secret(ofItemWithID:)``).
public struct KeychainItem: Sendable, Hashable, Codable {
    /// The item's identifier: 32 lowercase hexadecimal digits, random, fixed at creation and
    /// kept by updates and restores (usable as a D-Bus object path element).
    public let id: String
    /// A name for people (Secret Service's `Label`); not part of the item's identity.
    public var label: String
    /// The item's attributes. The whole set is the item's identity: no two items of one
    /// protection domain have the same set (`Keys/items.md` §4).
    public var attributes: [String: String]
    /// When the secret can be read.
    public var accessibility: ItemAccessibility
    /// When the item was added (millisecond precision).
    public var creationDate: Date
    /// When the item last changed (millisecond precision).
    public var modificationDate: Date

    /// Creates a description of an item (as ``Keychain/restore(_:)`` receives them).
    public init(id: String, label: String, attributes: [String: String], accessibility: ItemAccessibility,
                creationDate: Date, modificationDate: Date) {
        self.id = id
        self.label = label
        self.attributes = attributes
        self.accessibility = accessibility
        self.creationDate = creationDate
        self.modificationDate = modificationDate
    }

    /// The `service` attribute, if any (see ``ProtectedKeychain/setSecret(_:service:account:label:accessibility:)``).
    public var service: String? { attributes[Keychain.serviceAttribute] }
    /// The `account` attribute, if any.
    public var account: String? { attributes[Keychain.accountAttribute] }
}

/// The outcome of a search over every accessibility: the items found where their class key
/// is available, and the accessibilities that could not be searched because it is not.
public struct ItemSearch: Sendable, Hashable {
    /// The matching items that can be read now, oldest first.
    public var items: [KeychainItem]
    /// The accessibilities searched for whose items could not be read (their class key is not
    /// in memory): items of these may match too. Empty when the search was complete.
    public var lockedAccessibilities: Set<ItemAccessibility>

    /// Creates a search outcome.
    public init(items: [KeychainItem], lockedAccessibilities: Set<ItemAccessibility>) {
        self.items = items
        self.lockedAccessibilities = lockedAccessibilities
    }

    /// Whether every accessibility asked for was searched.
    public var isComplete: Bool { lockedAccessibilities.isEmpty }
}

/// An item with its secret, as a backup takes it (``Keychain/migratableItems()``) and a restore
/// gives it back (``Keychain/restore(_:)``). Not `Codable`: the backup encrypts the secret's
/// bytes itself.
public struct MigratableItem: Sendable {
    /// The item.
    public let item: KeychainItem
    /// Its secret, in secure memory.
    public let secret: ItemSecret

    /// Pairs an item with its secret.
    public init(item: KeychainItem, secret: ItemSecret) {
        self.item = item
        self.secret = secret
    }
}
