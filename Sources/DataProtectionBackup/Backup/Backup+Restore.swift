import DataProtection
import Foundation

extension Backup {
    /// Restores an archive into the empty `store`: all or nothing.
    ///
    /// The header is authenticated before anything is written; the tree is then built under a
    /// staging directory of the store and made visible in one step once the whole archive has
    /// authenticated, its last chunk included (`Keys/backup-format.md`, "Restore"). A
    /// tampered, truncated or foreign archive fails with `integrityFailure` and leaves the
    /// store as it was; so does a crash (the next opening of the store settles it).
    ///
    /// - Throws: `fileExists` if the store is not empty; `integrityFailure` for an archive that
    ///   does not authenticate, is not a backup, or holds what a backup never holds (links,
    ///   devices, paths leaving the store, absurd sizes).
    @discardableResult
    public static func restore(
        from input: BackupInput,
        identities: [AgeIdentity],
        into store: some ProtectedFileSystem,
        items: (any BackupItemSource)? = nil,
        progress: @escaping (UInt64) -> Void = { _ in }
    ) throws(DataProtectionError) -> BackupSummary {
        try RestoreStaging.recover(in: store)
        guard try RestoreStaging.isEmpty(store) else {
            throw DataProtectionError(.fileExists, "The target store is not empty: a backup restores only into an empty store.",
                                      hint: "Restore into a new store (dpctl init --store <new dir>, then dpctl backup restore --store <new dir> …).")
        }
        let decryptor = try AgeDecryptor(identities: identities, input: input)
        // The staging tree takes the target root's class: an entry without a class inherits
        // what it would in the target (never a class lower than the root's).
        let targetRootClass = try store.attributesOfItem(atPath: "/").protectionClass
        try store.createDirectory(atPath: RestoreStaging.name, withIntermediateDirectories: false, protection: .none)
        try store.createDirectory(atPath: RestoreStaging.tree, withIntermediateDirectories: false, protection: ProtectionChoice(targetRootClass))
        do throws(DataProtectionError) {
            let (summary, rootClass, itemsEntry) = try build(from: decryptor, into: store, progress: progress)
            if itemsEntry != nil && items == nil {
                throw DataProtectionError(.invalidArgument, "The archive holds keychain items, and this store cannot take them yet.",
                                          hint: "Restore it with a DataProtection that has items.")
            }
            try RestoreStaging.commit(in: store, rootClass: rootClass)
            if let itemsEntry, let items { try items.importItems(itemsEntry) }
            return summary
        } catch {
            try? RestoreStaging.discard(in: store)
            throw error
        }
    }

    /// Reads the whole archive into the staging tree; returns what it held.
    private static func build(
        from decryptor: AgeDecryptor, into store: some ProtectedFileSystem, progress: @escaping (UInt64) -> Void
    ) throws(DataProtectionError) -> (BackupSummary, ProtectionClass?, Data?) {
        let plaintext = AgePlaintextReader(decryptor)
        defer { plaintext.close() }
        let tar = PaxTarReader(plaintext, progress: progress)
        var entries: [BackupEntry] = []
        var seen: Set<String> = []
        var itemsEntry: Data?
        var contentBytes: UInt64 = 0
        var first = true
        while let entry = try tar.next() {
            if first, let name = tar.globalRecords[TarFormat.rootClassKey], let rootClass = ProtectionClass(rawValue: name) {
                // Entries without a class inherit the archived root's, as they did in the source.
                try store.setProtectionClass(rootClass, ofItemAtPath: RestoreStaging.tree)
            }
            first = false
            guard seen.insert(entry.path).inserted else { throw TarFormat.foreign("\(entry.path) appears twice") }
            guard entry.path != RestoreStaging.name, !entry.path.hasPrefix(RestoreStaging.name + "/") else {
                throw TarFormat.foreign("the reserved name \(RestoreStaging.name)")
            }
            entries.append(entry)
            let staged = RestoreStaging.tree + "/" + entry.path
            let choice = ProtectionChoice(entry.protectionClass)
            switch entry.kind {
            case .directory:
                if store.fileExists(atPath: staged) {
                    guard try store.attributesOfItem(atPath: staged).type == .directory else { throw TarFormat.foreign("\(entry.path) is a file and a directory") }
                    if let protectionClass = entry.protectionClass { try store.setProtectionClass(protectionClass, ofItemAtPath: staged) }
                } else {
                    try createParents(of: staged, in: store)
                    try store.createDirectory(atPath: staged, withIntermediateDirectories: false, protection: choice)
                }
            case .file:
                try createParents(of: staged, in: store)
                var failure: DataProtectionError?
                do {
                    // The source's own failure (a chunk that does not authenticate) wins over the store's report of it.
                    try store.write(to: staged, protection: choice, exclusive: true) { () throws(DataProtectionError) -> Data? in
                        do throws(DataProtectionError) {
                            let piece = try tar.content(upTo: pieceSize)
                            return piece.isEmpty ? nil : piece
                        } catch {
                            failure = error
                            throw error
                        }
                    }
                } catch {
                    throw failure ?? Self.dataProtectionError(error, restoring: entry.path)
                }
                contentBytes += entry.size
            case .items:
                guard entry.size <= itemsEntryLimit, itemsEntry == nil else { throw TarFormat.foreign("an items entry too large or repeated") }
                var data = Data()
                while true {
                    let piece = try tar.content(upTo: pieceSize)
                    if piece.isEmpty { break }
                    data += piece
                }
                itemsEntry = data
            }
        }
        // The tar end marker was read to the payload's end: the last chunk authenticated, and
        // nothing followed it.
        var rootClass: ProtectionClass?
        if let name = tar.globalRecords[TarFormat.rootClassKey] {
            guard let value = ProtectionClass(rawValue: name) else { throw TarFormat.foreign("unknown root class \(name)") }
            rootClass = value
        }
        if let format = tar.globalRecords[TarFormat.formatKey], format != "1" {
            throw TarFormat.foreign("backup format \(format) (this DataProtection reads format 1)")
        }
        plaintext.close()
        let summary = BackupSummary(entries: entries, archiveBytes: decryptor.consumed, contentBytes: contentBytes,
                                    recipientTypes: decryptor.stanzaTypes)
        return (summary, rootClass, itemsEntry)
    }

    /// `error` as the store reported it (typed already where `write(to:from:)` throws
    /// `DataProtectionError`; otherwise `ioFailure` naming it).
    private static func dataProtectionError(_ error: any Error, restoring path: String) -> DataProtectionError {
        (error as? DataProtectionError) ?? DataProtectionError(.ioFailure, "Cannot restore \(path): \(error).")
    }

    /// Makes the missing parents of `path` (archives not written by dpctl may omit them).
    private static func createParents(of path: String, in store: some ProtectedFileSystem) throws(DataProtectionError) {
        guard let slash = path.lastIndex(of: "/") else { return }
        let parent = String(path[..<slash])
        if !store.fileExists(atPath: parent) {
            try store.createDirectory(atPath: parent, withIntermediateDirectories: true, protection: .inherited)
        }
    }
}
