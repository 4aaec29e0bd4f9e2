import DataProtection
import DataProtectionSQLite
import Foundation

/// The keychain items of a store as a backup takes them and a restore gives them back
/// (`Keys/backup-format.md` §5): every `whenUnlocked` and `afterFirstUnlock` item (never a
/// `…ThisDeviceOnly` one), with its label, attributes and secret.
///
/// Works over any `ProtectedKeychain`: `store.keychain` in this process, `AgentStore.keychain`
/// through an agent. A restore into an in-process `Keychain` adds the items with
/// `Keychain.restore(_:)` (one transaction per protection domain); through an agent, one
/// add at a time.
public struct KeychainBackupItems: BackupItemSource {
    /// The accessibilities that leave the device in a backup.
    public static let migrating: Set<ItemAccessibility> = [.whenUnlocked, .afterFirstUnlock]

    private let keychain: any ProtectedKeychain

    /// The items of `keychain`.
    public init(_ keychain: any ProtectedKeychain) {
        self.keychain = keychain
    }

    /// The items entry of every `whenUnlocked` and `afterFirstUnlock` item (`nil`: none).
    ///
    /// - Throws: `protectedDataUnavailable` naming the accessibilities whose class key is away.
    public func exportMigratableItems() throws(DataProtectionError) -> Data? {
        let search = try keychain.items(matching: [:], accessibilities: Self.migrating)
        guard search.isComplete else {
            let locked = search.lockedAccessibilities.map(\.rawValue).sorted().joined(separator: ", ")
            throw DataProtectionError(.protectedDataUnavailable, "Cannot back up the keychain items (\(locked)): their class key is not in memory.",
                                      hint: "Unlock the device, then try again.")
        }
        guard !search.items.isEmpty else { return nil }
        var objects: [[String: Any]] = []
        for item in search.items.sorted(by: { $0.id < $1.id }) {
            let secret = try keychain.secret(ofItemWithID: item.id)
            defer { secret.wipe() }
            let base64 = secret.withUnsafeBytes { Data($0).base64EncodedString() }
            objects.append(["label": item.label, "accessibility": item.accessibility.rawValue,
                            "attributes": item.attributes, "secret": base64])
        }
        do {
            return try JSONSerialization.data(withJSONObject: ["version": 1, "items": objects], options: [.sortedKeys])
        } catch {
            throw DataProtectionError(.invalidArgument, "Cannot encode the keychain items: \(error).")
        }
    }

    /// Adds the items of an items entry to the keychain.
    ///
    /// - Throws: `integrityFailure` for an entry that is not one, or what adding threw.
    public func importItems(_ entry: Data) throws(DataProtectionError) {
        let items = try Self.decode(entry)
        if let keychain = keychain as? Keychain {
            let now = Date()
            try keychain.restore(items.map { item in
                MigratableItem(item: KeychainItem(id: Self.newIdentifier(), label: item.label, attributes: item.attributes,
                                                  accessibility: item.accessibility, creationDate: now, modificationDate: now),
                               secret: item.secret)
            })
        } else {
            for item in items {
                try keychain.add(item.secret, label: item.label, attributes: item.attributes,
                                 accessibility: item.accessibility, replacing: false)
            }
        }
    }

    private struct Entry {
        var label: String
        var accessibility: ItemAccessibility
        var attributes: [String: String]
        var secret: ItemSecret
    }

    private static func decode(_ entry: Data) throws(DataProtectionError) -> [Entry] {
        func foreign(_ what: String) -> DataProtectionError {
            DataProtectionError(.integrityFailure, "The archive's items entry is not one: \(what).")
        }
        let object: Any
        do {
            object = try JSONSerialization.jsonObject(with: entry)
        } catch {
            throw foreign("not JSON")
        }
        guard let root = object as? [String: Any], root["version"] as? Int == 1, let list = root["items"] as? [Any] else {
            throw foreign("no version 1 and items")
        }
        var result: [Entry] = []
        for element in list {
            guard let fields = element as? [String: Any], let label = fields["label"] as? String,
                  let accessibilityName = fields["accessibility"] as? String,
                  let accessibility = ItemAccessibility(rawValue: accessibilityName), migrating.contains(accessibility),
                  let attributes = fields["attributes"] as? [String: String],
                  let encoded = fields["secret"] as? String, let bytes = Data(base64Encoded: encoded)
            else { throw foreign("an item without label, migrating accessibility, attributes or secret") }
            result.append(Entry(label: label, accessibility: accessibility, attributes: attributes, secret: ItemSecret(bytes: bytes)))
        }
        return result
    }

    private static func newIdentifier() -> String {
        var generator = SystemRandomNumberGenerator()
        return (0..<16).map { _ in String(format: "%02x", UInt8.random(in: 0...255, using: &generator)) }.joined()
    }
}
