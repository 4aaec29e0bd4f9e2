import DataProtection

/// What a program does with keychain items, wherever the store lives: in this process
/// (``Keychain``, from `store.keychain`) or in an agent
/// (`AgentStore.keychain`, product `DataProtectionAgent`). Every operation follows the class
/// rules of the device that owns the store.
public protocol ProtectedKeychain: Sendable {
    /// Adds an item (see ``Keychain/add(_:label:attributes:accessibility:replacing:)``).
    @discardableResult
    func add(
        _ secret: ItemSecret, label: String, attributes: [String: String], accessibility: ItemAccessibility, replacing: Bool
    ) throws(DataProtectionError) -> KeychainItem
    /// The items matching `attributes` in `accessibilities`, and which of those were locked
    /// (see ``Keychain/items(matching:accessibilities:)``).
    func items(matching attributes: [String: String], accessibilities: Set<ItemAccessibility>) throws(DataProtectionError) -> ItemSearch
    /// The item `id` (see ``Keychain/item(withID:)``).
    func item(withID id: String) throws(DataProtectionError) -> KeychainItem
    /// The secret of item `id` (see ``Keychain/secret(ofItemWithID:)``).
    func secret(ofItemWithID id: String) throws(DataProtectionError) -> ItemSecret
    /// Changes item `id` (see ``Keychain/updateItem(withID:label:attributes:secret:)``).
    @discardableResult
    func updateItem(withID id: String, label: String?, attributes: [String: String]?, secret: ItemSecret?) throws(DataProtectionError) -> KeychainItem
    /// Changes item `id`, its accessibility too when given (see
    /// ``Keychain/updateItem(withID:label:attributes:secret:accessibility:)``).
    @discardableResult
    func updateItem(
        withID id: String, label: String?, attributes: [String: String]?, secret: ItemSecret?, accessibility: ItemAccessibility?
    ) throws(DataProtectionError) -> KeychainItem
    /// Changes every readable item matching `attributes` (see ``Keychain/update(matching:label:attributes:secret:)``).
    @discardableResult
    func update(
        matching attributes: [String: String], label: String?, attributes newAttributes: [String: String]?, secret: ItemSecret?
    ) throws(DataProtectionError) -> [KeychainItem]
    /// Deletes item `id` (see ``Keychain/deleteItem(withID:)``).
    func deleteItem(withID id: String) throws(DataProtectionError)
    /// Deletes every readable item matching `attributes` (see ``Keychain/delete(matching:)``).
    @discardableResult
    func delete(matching attributes: [String: String]) throws(DataProtectionError) -> Int
    /// A number that grows with every change (see ``Keychain/generation``).
    var generation: UInt64 { get throws(DataProtectionError) }
}

extension ProtectedKeychain {
    /// The items matching `attributes` in every accessibility.
    public func items(matching attributes: [String: String]) throws(DataProtectionError) -> ItemSearch {
        try items(matching: attributes, accessibilities: Set(ItemAccessibility.allCases))
    }

    /// The oldest item whose attributes include every one of `attributes`.
    ///
    /// - Throws: `fileNotFound` (no match, and every class searched), `protectedDataUnavailable`
    ///   (no match among the items that can be read, and some cannot).
    public func item(matching attributes: [String: String]) throws(DataProtectionError) -> KeychainItem {
        let search = try items(matching: attributes)
        if let first = search.items.min(by: { ($0.creationDate, $0.id) < ($1.creationDate, $1.id) }) { return first }
        throw Keychain.noMatch(search, "No item matches \(Keychain.describe(attributes)).")
    }

    /// The secret of the oldest item whose attributes include every one of `attributes`.
    ///
    /// - Throws: as ``item(matching:)``.
    public func secret(matching attributes: [String: String]) throws(DataProtectionError) -> ItemSecret {
        try secret(ofItemWithID: item(matching: attributes).id)
    }

    /// Sets the secret of the item for `service` and `account` (the attributes
    /// `service` and `account`, and no other), adding the item or replacing its secret.
    ///
    /// - Parameters:
    ///   - secret: the secret.
    ///   - service: the `service` attribute.
    ///   - account: the `account` attribute.
    ///   - label: the item's label (default: `service`).
    ///   - accessibility: when the secret can be read (of an item added now; a replaced item takes it too).
    @discardableResult
    public func setSecret(
        _ secret: ItemSecret, service: String, account: String, label: String? = nil, accessibility: ItemAccessibility = .whenUnlocked
    ) throws(DataProtectionError) -> KeychainItem {
        try add(secret, label: label ?? service, attributes: Keychain.attributes(service: service, account: account),
                accessibility: accessibility, replacing: true)
    }

    /// The secret of the item for `service` and `account`.
    ///
    /// - Throws: `fileNotFound`, or `protectedDataUnavailable` when it may be among the items
    ///   that cannot be read now.
    public func secret(service: String, account: String) throws(DataProtectionError) -> ItemSecret {
        try secret(matching: Keychain.attributes(service: service, account: account))
    }

    /// Deletes the items for `service` and `account`.
    ///
    /// - Throws: as ``secret(service:account:)``.
    public func deleteItem(service: String, account: String) throws(DataProtectionError) {
        try delete(matching: Keychain.attributes(service: service, account: account))
    }
}

extension Keychain: ProtectedKeychain {}
