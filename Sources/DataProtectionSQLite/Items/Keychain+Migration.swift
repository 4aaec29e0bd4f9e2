import DataProtection

extension Keychain {
    /// Every item that may leave the device (not `…ThisDeviceOnly`), with its secret, at one
    /// instant: what a backup takes (issue 37). No keychain change can land while they are read.
    ///
    /// - Throws: `protectedDataUnavailable` when a class holding such items is locked (a backup
    ///   never silently leaves items out).
    public func migratableItems() throws(DataProtectionError) -> [MigratableItem] {
        try serialized { () throws(DataProtectionError) -> [MigratableItem] in
            var result: [MigratableItem] = []
            for domain in [ItemDomain.whenUnlocked, .afterFirstUnlock] {
                switch try readableDatabase(domain) {
                case .empty: continue
                case .locked:
                    throw DataProtectionError(.protectedDataUnavailable, "The \(domain.rawValue) items are locked.",
                                              hint: "Unlock the device, then try again.")
                case .open(let database):
                    try database.transaction { () throws(DataProtectionError) in
                        result += try database.everyItemWithSecret().filter { !$0.item.accessibility.isThisDeviceOnly }
                    }
                }
            }
            return result
        }
    }

    /// Adds `items` as they are (identifiers, dates and accessibilities kept): what a restore
    /// gives back (issue 37). Each protection domain's items go in one transaction; nothing is
    /// added when any item conflicts.
    ///
    /// - Throws: `fileExists` (an item with the same identifier, or the same attribute set in
    ///   its domain, exists), `protectedDataUnavailable` (a class key is not in memory, or a
    ///   passcode-bound item without a passcode), `invalidArgument`.
    public func restore(_ items: [MigratableItem]) throws(DataProtectionError) {
        for entry in items {
            try ItemIdentity.validate(label: entry.item.label, attributes: entry.item.attributes)
            guard entry.item.id.count == 32, entry.item.id.allSatisfy({ $0.isHexDigit && !$0.isUppercase }) else {
                throw DataProtectionError(.invalidArgument, "An item identifier is not 32 lowercase hexadecimal digits.")
            }
        }
        try serialized { () throws(DataProtectionError) in
            let byDomain = Dictionary(grouping: items) { $0.item.accessibility.domain }
            var databases: [(ItemDatabase, [MigratableItem])] = []
            var seenIDs = Set<String>()
            var seenIdentities = Set<String>()
            for domain in ItemDomain.allCases {
                guard let entries = byDomain[domain] else { continue }
                let database = try writableDatabase(domain)
                for entry in entries {
                    let identity = ItemIdentity.encode(entry.item.attributes)
                    guard seenIDs.insert(entry.item.id).inserted, seenIdentities.insert(domain.rawValue + "\n" + identity).inserted,
                          try database.item(id: entry.item.id) == nil, try database.item(identity: identity) == nil
                    else {
                        throw DataProtectionError(.fileExists, "An item to restore (\(entry.item.id)) exists already.")
                    }
                }
                databases.append((database, entries))
            }
            for (database, entries) in databases {
                try database.transaction { () throws(DataProtectionError) in
                    for entry in entries { try database.insert(entry.item, secret: entry.secret) }
                }
            }
            if !items.isEmpty { recordChange() }
        }
    }
}
