import DataProtection

extension Keychain {
    /// Sets the secret of the item for `service` and `account` (the attributes
    /// `service` and `account`, and no other), adding the item or replacing its secret.
    ///
    /// - Parameter label: the item's label (default: `service`).
    @discardableResult
    public func setSecret(
        _ secret: ItemSecret, service: String, account: String, label: String? = nil, accessibility: ItemAccessibility = .whenUnlocked
    ) throws(DataProtectionError) -> KeychainItem {
        try add(secret, label: label ?? service, attributes: Self.attributes(service: service, account: account),
                accessibility: accessibility, replacing: true)
    }

    /// The secret of the item for `service` and `account`.
    ///
    /// - Throws: `fileNotFound`, or `protectedDataUnavailable` when it may be among the items
    ///   that cannot be read now.
    public func secret(service: String, account: String) throws(DataProtectionError) -> ItemSecret {
        try secret(matching: Self.attributes(service: service, account: account))
    }

    /// Deletes the items for `service` and `account`.
    ///
    /// - Throws: as ``secret(service:account:)``.
    public func deleteItem(service: String, account: String) throws(DataProtectionError) {
        try delete(matching: Self.attributes(service: service, account: account))
    }

    /// `["service": service, "account": account]`.
    public static func attributes(service: String, account: String) -> [String: String] {
        [serviceAttribute: service, accountAttribute: account]
    }
}
