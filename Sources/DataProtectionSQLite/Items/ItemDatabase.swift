import DataProtection
import Foundation
import SQLiteBridge
import SodiumBridge

/// One protection domain's items: a protected SQLite database of the domain's class at
/// `/.dataprotection-items/<domain>/items.db` (`Keys/items.md` §3). Used only under the
/// keychain's lock.
final class ItemDatabase {
    let domain: ItemDomain
    let database: ProtectedDatabase

    /// The columns every metadata query reads, in this order.
    static let columns = "id, accessibility, label, identity, created, modified"

    /// Opens (with `create`, creates) the domain's database.
    init(domain: ItemDomain, store: ProtectedStore, create: Bool) throws(DataProtectionError) {
        self.domain = domain
        database = try ReservedStoreArea.withAccess { () throws(DataProtectionError) -> ProtectedDatabase in
            try ProtectedDatabase(atPath: domain.databasePath, in: store, create: create,
                                  protection: ProtectionChoice(domain.protectionClass), journalMode: .wal)
        }
        do throws(DataProtectionError) {
            // Durable on return; a page cache of up to 16 MiB (the indexes of some 100,000 items:
            // random lookups then read few pages from the store). Plaintext, wiped when the class
            // key goes (ProtectedDatabase). Temporary B-trees (INTERSECT, ORDER BY) in memory, never a file.
            try database.execute("PRAGMA synchronous = FULL; PRAGMA cache_size = -16384; PRAGMA temp_store = MEMORY")
            try database.execute("""
                CREATE TABLE IF NOT EXISTS item(
                    id TEXT PRIMARY KEY NOT NULL,
                    accessibility TEXT NOT NULL,
                    label TEXT NOT NULL,
                    identity TEXT NOT NULL UNIQUE,
                    created INTEGER NOT NULL,
                    modified INTEGER NOT NULL,
                    secret BLOB NOT NULL);
                CREATE TABLE IF NOT EXISTS attribute(
                    item TEXT NOT NULL,
                    name TEXT NOT NULL,
                    value TEXT NOT NULL,
                    PRIMARY KEY(item, name)) WITHOUT ROWID;
                CREATE INDEX IF NOT EXISTS attribute_by_value ON attribute(name, value, item);
                CREATE TABLE IF NOT EXISTS move(
                    id TEXT PRIMARY KEY NOT NULL,
                    target TEXT NOT NULL) WITHOUT ROWID;
                PRAGMA user_version = 1;
                """)
        } catch {
            database.close()
            throw error
        }
    }

    func close() { database.close() }

    // MARK: - Reading

    /// The items whose attributes include every one of `attributes`, oldest first.
    func items(matching attributes: [String: String]) throws(DataProtectionError) -> [KeychainItem] {
        var sql = "SELECT \(Self.columns) FROM item"
        var arguments: [SQLiteValue] = []
        if !attributes.isEmpty {
            let pairs = attributes.sorted { $0.key < $1.key }
            sql += " WHERE id IN (" + pairs.map { _ in "SELECT item FROM attribute WHERE name = ? AND value = ?" }
                .joined(separator: " INTERSECT ") + ")"
            for (name, value) in pairs { arguments += [.text(name), .text(value)] }
        }
        sql += " ORDER BY created, id"
        return try database.query(sql, arguments).map { row throws(DataProtectionError) in try Self.item(from: row) }
    }

    /// Every item's identifier, accessibility and modification date (milliseconds): what tells
    /// that an item came, changed or went, without decoding its attributes.
    func stamps() throws(DataProtectionError) -> [(id: String, accessibility: ItemAccessibility, modified: Int64)] {
        try database.query("SELECT id, accessibility, modified FROM item").compactMap { row -> (id: String, accessibility: ItemAccessibility, modified: Int64)? in
            guard row.values.count == 3, case .text(let id) = row.values[0], case .text(let name) = row.values[1],
                  let accessibility = ItemAccessibility(rawValue: name), case .integer(let modified) = row.values[2] else { return nil }
            return (id, accessibility, modified)
        }
    }

    /// The item with exactly the attribute set `identity`, if any.
    func item(identity: String) throws(DataProtectionError) -> KeychainItem? {
        try database.query("SELECT \(Self.columns) FROM item WHERE identity = ?", [.text(identity)]).first
            .map { row throws(DataProtectionError) in try Self.item(from: row) }
    }

    /// The item `id`, if it lives here.
    func item(id: String) throws(DataProtectionError) -> KeychainItem? {
        try database.query("SELECT \(Self.columns) FROM item WHERE id = ?", [.text(id)]).first
            .map { row throws(DataProtectionError) in try Self.item(from: row) }
    }

    /// The secret of item `id`, copied from SQLite's memory into secure memory.
    func secret(id: String) throws(DataProtectionError) -> ItemSecret? {
        var found: SecureBytes?
        try database.withSQLite { connection throws(SQLiteError) in
            try connection.enumerateRows("SELECT secret FROM item WHERE id = ?", arguments: [.text(id)], secretColumn: 0) { _, secret in
                found = secret
                return false
            }
        }
        return found.map(ItemSecret.init(secure:))
    }

    /// Every item here with its secret (one read transaction: one instant).
    func everyItemWithSecret() throws(DataProtectionError) -> [MigratableItem] {
        var rows: [(SQLiteRow, SecureBytes?)] = []
        try database.withSQLite { connection throws(SQLiteError) in
            try connection.enumerateRows("SELECT \(Self.columns), secret FROM item ORDER BY created, id", arguments: [], secretColumn: 6) { row, secret in
                rows.append((row, secret))
                return true
            }
        }
        var result: [MigratableItem] = []
        for (row, secret) in rows {
            guard let secret else { throw DataProtectionError(.integrityFailure, "An item has no secret.") }
            result.append(MigratableItem(item: try Self.item(from: row), secret: ItemSecret(secure: secret)))
        }
        return result
    }

    static func item(from row: SQLiteRow) throws(DataProtectionError) -> KeychainItem {
        let values = row.values
        guard values.count >= 6,
              case .text(let id) = values[0], case .text(let accessibilityName) = values[1],
              let accessibility = ItemAccessibility(rawValue: accessibilityName),
              case .text(let label) = values[2], case .text(let identity) = values[3],
              case .integer(let created) = values[4], case .integer(let modified) = values[5]
        else { throw DataProtectionError(.integrityFailure, "An item's record is corrupt.") }
        return KeychainItem(id: id, label: label, attributes: try ItemIdentity.decode(identity), accessibility: accessibility,
                            creationDate: date(created), modificationDate: date(modified))
    }

    /// Now, at the millisecond precision items keep.
    static func now() -> Date { date(milliseconds(Date())) }

    static func date(_ milliseconds: Int64) -> Date { Date(timeIntervalSince1970: Double(milliseconds) / 1000) }
    static func milliseconds(_ date: Date) -> Int64 { Int64((date.timeIntervalSince1970 * 1000).rounded()) }

    // MARK: - Writing

    /// Runs `body` in one write transaction: all of it is committed (durably) or none of it.
    func transaction<R>(_ body: () throws(DataProtectionError) -> R) throws(DataProtectionError) -> R {
        try database.execute("BEGIN IMMEDIATE")
        do throws(DataProtectionError) {
            let result = try body()
            try database.execute("COMMIT")
            return result
        } catch {
            if database.isInTransaction { try? database.execute("ROLLBACK") }
            throw error
        }
    }

    /// Inserts `item` with `secret` (inside a transaction).
    func insert(_ item: KeychainItem, secret: ItemSecret) throws(DataProtectionError) {
        let arguments: [SQLiteValue] = [
            .text(item.id), .text(item.accessibility.rawValue), .text(item.label), .text(ItemIdentity.encode(item.attributes)),
            .integer(Self.milliseconds(item.creationDate)), .integer(Self.milliseconds(item.modificationDate)),
        ]
        try database.withSQLite { connection throws(SQLiteError) in
            try connection.execute("INSERT INTO item(\(Self.columns), secret) VALUES (?, ?, ?, ?, ?, ?, ?)", arguments: arguments, secret: secret.bytes)
        }
        try insertAttributes(of: item)
    }

    private func insertAttributes(of item: KeychainItem) throws(DataProtectionError) {
        for (name, value) in item.attributes {
            try database.execute("INSERT INTO attribute(item, name, value) VALUES (?, ?, ?)", [.text(item.id), .text(name), .text(value)])
        }
    }

    /// Rewrites `item`'s record (its id unchanged), and its secret when given (inside a transaction).
    func replace(_ item: KeychainItem, secret: ItemSecret?) throws(DataProtectionError) {
        try database.execute(
            "UPDATE item SET accessibility = ?, label = ?, identity = ?, modified = ? WHERE id = ?",
            [.text(item.accessibility.rawValue), .text(item.label), .text(ItemIdentity.encode(item.attributes)),
             .integer(Self.milliseconds(item.modificationDate)), .text(item.id)])
        if let secret {
            try database.withSQLite { connection throws(SQLiteError) in
                try connection.execute("UPDATE item SET secret = ?2 WHERE id = ?1", arguments: [.text(item.id)], secret: secret.bytes)
            }
        }
        try database.execute("DELETE FROM attribute WHERE item = ?", [.text(item.id)])
        try insertAttributes(of: item)
    }

    // MARK: - Moves between domains

    /// The moves of items from this domain to another begun and not finished (`Keys/items.md` §9).
    func pendingMoves() throws(DataProtectionError) -> [(id: String, target: ItemDomain)] {
        try database.query("SELECT id, target FROM move").compactMap { row -> (id: String, target: ItemDomain)? in
            guard row.values.count == 2, case .text(let id) = row.values[0], case .text(let name) = row.values[1],
                  let target = ItemDomain(rawValue: name) else { return nil }
            return (id, target)
        }
    }

    /// Records that item `id` is being moved to `target` (inside a transaction).
    func recordMove(id: String, to target: ItemDomain) throws(DataProtectionError) {
        try database.execute("INSERT OR REPLACE INTO move(id, target) VALUES (?, ?)", [.text(id), .text(target.rawValue)])
    }

    /// Forgets the move of item `id` (inside a transaction).
    func forgetMove(id: String) throws(DataProtectionError) {
        try database.execute("DELETE FROM move WHERE id = ?", [.text(id)])
    }

    /// Deletes item `id` (inside a transaction).
    func delete(id: String) throws(DataProtectionError) {
        try database.execute("DELETE FROM attribute WHERE item = ?", [.text(id)])
        try database.execute("DELETE FROM item WHERE id = ?", [.text(id)])
    }
}
