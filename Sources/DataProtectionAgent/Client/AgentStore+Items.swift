import DataProtection
import DataProtectionSQLite
import Foundation
import SodiumBridge

extension AgentStore {
    /// The agent's keychain: the surface of `Keychain`, carried out inside the agent
    /// (`Keys/agent-protocol.md` §4, codes 40-48). Secrets cross the socket only to a client
    /// of the agent's own user (checked before a byte is sent), in frames wiped once used.
    public var keychain: AgentKeychain { AgentKeychain(connection: connection) }
}

/// Keychain items in a store served by an agent (``AgentStore/keychain``). Every operation
/// follows the agent's device exactly as `Keychain` does in the agent.
public struct AgentKeychain: ProtectedKeychain {
    let connection: AgentConnection

    /// Adds an item (see `Keychain.add(_:label:attributes:accessibility:replacing:)`).
    @discardableResult
    public func add(
        _ secret: ItemSecret, label: String, attributes: [String: String], accessibility: ItemAccessibility = .whenUnlocked,
        replacing: Bool = false
    ) throws(DataProtectionError) -> KeychainItem {
        try item(try connection.call(.itemAdd(label: label, attributes: attributes, accessibility: accessibility, replacing: replacing, secret: secret)))
    }

    /// The items matching `attributes` in `accessibilities`, and which of those were locked.
    public func items(
        matching attributes: [String: String], accessibilities: Set<ItemAccessibility> = Set(ItemAccessibility.allCases)
    ) throws(DataProtectionError) -> ItemSearch {
        let body = try connection.call(.itemSearch(attributes: attributes, accessibilities: accessibilities))
        return try AgentStore.decode(body) { body throws(AgentProtocolViolation) -> ItemSearch in
            var reader = AgentFieldReader(body)
            let search = ItemSearch(items: try reader.items(), lockedAccessibilities: try reader.accessibilities())
            try reader.finish()
            return search
        }
    }

    /// The item `id`.
    public func item(withID id: String) throws(DataProtectionError) -> KeychainItem {
        try item(try connection.call(.itemByID(id: id)))
    }

    /// The secret of item `id`, copied from the agent's answer into secure memory (the
    /// answer's frame is wiped).
    public func secret(ofItemWithID id: String) throws(DataProtectionError) -> ItemSecret {
        var body = try connection.call(.itemSecret(id: id))
        defer { Sodium.wipe(&body) }
        return try AgentStore.decode(body) { body throws(AgentProtocolViolation) -> ItemSecret in
            var reader = AgentFieldReader(body)
            let secret = try reader.secret()
            try reader.finish()
            return secret
        }
    }

    /// Changes item `id` (see `Keychain.updateItem(withID:label:attributes:secret:)`).
    @discardableResult
    public func updateItem(
        withID id: String, label: String? = nil, attributes: [String: String]? = nil, secret: ItemSecret? = nil
    ) throws(DataProtectionError) -> KeychainItem {
        try item(try connection.call(.itemUpdate(id: id, label: label, attributes: attributes, secret: secret)))
    }

    /// Changes item `id`, its accessibility too when given (see
    /// `Keychain.updateItem(withID:label:attributes:secret:accessibility:)`).
    @discardableResult
    public func updateItem(
        withID id: String, label: String? = nil, attributes: [String: String]? = nil, secret: ItemSecret? = nil,
        accessibility: ItemAccessibility?
    ) throws(DataProtectionError) -> KeychainItem {
        guard let accessibility else { return try updateItem(withID: id, label: label, attributes: attributes, secret: secret) }
        return try item(try connection.call(.itemUpdateAccessibility(id: id, accessibility: accessibility, label: label,
                                                                     attributes: attributes, secret: secret)))
    }

    /// Changes every readable item matching `attributes` (see `Keychain.update(matching:label:attributes:secret:)`).
    @discardableResult
    public func update(
        matching attributes: [String: String], label: String? = nil, attributes newAttributes: [String: String]? = nil,
        secret: ItemSecret? = nil
    ) throws(DataProtectionError) -> [KeychainItem] {
        let body = try connection.call(.itemUpdateMatching(attributes: attributes, label: label, newAttributes: newAttributes, secret: secret))
        return try AgentStore.decode(body) { body throws(AgentProtocolViolation) -> [KeychainItem] in
            var reader = AgentFieldReader(body)
            let items = try reader.items()
            try reader.finish()
            return items
        }
    }

    /// Deletes item `id`.
    public func deleteItem(withID id: String) throws(DataProtectionError) {
        try AgentStore.decode(try connection.call(.itemDelete(id: id)), AgentReply.empty)
    }

    /// Deletes every readable item matching `attributes`; how many.
    @discardableResult
    public func delete(matching attributes: [String: String]) throws(DataProtectionError) -> Int {
        Int(try AgentStore.decode(try connection.call(.itemDeleteMatching(attributes: attributes)), AgentReply.u64))
    }

    /// The agent's keychain generation (see `Keychain.generation`).
    public var generation: UInt64 {
        get throws(DataProtectionError) {
            try AgentStore.decode(try connection.call(.itemGeneration), AgentReply.u64)
        }
    }

    private func item(_ body: [UInt8]) throws(DataProtectionError) -> KeychainItem {
        try AgentStore.decode(body) { body throws(AgentProtocolViolation) -> KeychainItem in
            var reader = AgentFieldReader(body)
            let item = try reader.item()
            try reader.finish()
            return item
        }
    }
}
