import DataProtection
import Foundation

/// Accessibility changes that move an item between domains (`Keys/items.md` §9), and the
/// cheap census the Secret Service provider compares to tell changes.
extension Keychain {
    /// Under `serial`: moves `item` from `source` to the domain of `accessibility`, in three
    /// durable steps: the move is recorded in the source, the item (same identifier) is
    /// inserted in the target, then the item and the record leave the source. A crash
    /// between them is resolved by ``resolvePendingMoves()``: recorded and in the target,
    /// the source's copy goes; recorded and not in the target, the record goes.
    func move(
        _ item: KeychainItem, from source: ItemDatabase, to accessibility: ItemAccessibility, label: String?,
        attributes: [String: String]?, secret: ItemSecret?
    ) throws(DataProtectionError) -> KeychainItem {
        let target = try writableDatabase(accessibility.domain)
        var moved = item
        if let label { moved.label = label }
        if let attributes { moved.attributes = attributes }
        moved.accessibility = accessibility
        moved.modificationDate = ItemDatabase.now()
        if let other = try target.item(identity: ItemIdentity.encode(moved.attributes)), other.id != item.id {
            throw DataProtectionError(.fileExists, "Another item (\(other.id)) has the attributes \(Self.describe(moved.attributes)) "
                                      + "among the \(accessibility.domain.rawValue) items.")
        }
        let movedSecret: ItemSecret
        if let secret {
            movedSecret = secret
        } else if let stored = try source.secret(id: item.id) {
            movedSecret = stored
        } else {
            throw DataProtectionError(.fileNotFound, "No item \(item.id).")
        }
        defer { if secret == nil { movedSecret.wipe() } }
        try source.transaction { () throws(DataProtectionError) in try source.recordMove(id: item.id, to: accessibility.domain) }
        do throws(DataProtectionError) {
            try target.transaction { () throws(DataProtectionError) in
                try target.delete(id: item.id)  // a copy a crashed move left, if any
                try target.insert(moved, secret: movedSecret)
            }
        } catch {
            try? source.transaction { () throws(DataProtectionError) in try source.forgetMove(id: item.id) }
            throw error
        }
        try source.transaction { () throws(DataProtectionError) in
            try source.delete(id: item.id)
            try source.forgetMove(id: item.id)
        }
        return moved
    }

    /// Under `serial`: finishes the moves a crash cut, for every source domain whose target
    /// can be read now (before any lookup: an item is never visible in two domains). A
    /// database that cannot be opened is left to the operation that needs it (which fails).
    func resolvePendingMoves() throws(DataProtectionError) {
        for domain in ItemDomain.allCases {
            guard case .open(let source)? = try? readableDatabase(domain) else { continue }
            if state.pendingMoves[domain] == nil { state.pendingMoves[domain] = try source.pendingMoves() }
            guard let moves = state.pendingMoves[domain], !moves.isEmpty else { continue }
            var left: [(id: String, target: ItemDomain)] = []
            for move in moves {
                let arrived: Bool
                guard let readable = try? readableDatabase(move.target) else { left.append(move); continue }
                switch readable {
                case .locked: left.append(move); continue
                case .empty: arrived = false
                case .open(let target): arrived = try target.item(id: move.id) != nil
                }
                try source.transaction { () throws(DataProtectionError) in
                    if arrived { try source.delete(id: move.id) }
                    try source.forgetMove(id: move.id)
                }
            }
            state.pendingMoves[domain] = left
            if left.count != moves.count { changed() }
        }
    }

    /// Every readable item's accessibility and modification date (milliseconds since 1970), by
    /// identifier, and the accessibilities that could not be read: a cheap way to tell which
    /// items came, changed or went (the Secret Service provider's change signals).
    package func itemStamps() throws(DataProtectionError) -> (stamps: [String: (accessibility: ItemAccessibility, modified: Int64)],
                                                             locked: Set<ItemAccessibility>) {
        try serialized { () throws(DataProtectionError) -> (stamps: [String: (accessibility: ItemAccessibility, modified: Int64)], locked: Set<ItemAccessibility>) in
            var stamps: [String: (accessibility: ItemAccessibility, modified: Int64)] = [:]
            var locked = Set<ItemAccessibility>()
            for domain in ItemDomain.allCases {
                switch try readableDatabase(domain) {
                case .empty: continue
                case .locked: locked.formUnion(domain.accessibilities)
                case .open(let database):
                    for stamp in try database.stamps() { stamps[stamp.id] = (stamp.accessibility, stamp.modified) }
                }
            }
            return (stamps, locked)
        }
    }
}
