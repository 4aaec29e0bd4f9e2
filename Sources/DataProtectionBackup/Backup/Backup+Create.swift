import DataProtection
import DataProtectionSQLite
import Foundation

extension Backup {
    /// Writes one archive of the whole of `store` to `output`, encrypted to `recipients`.
    ///
    /// Before a byte is written, every file's class is checked against `device`: if any class
    /// is unavailable the backup fails with `protectedDataUnavailable`, naming the files it
    /// could not read, and writes nothing. One instant: the archive holds the store as it is
    /// while this runs; in one process the caller owns the store (no other process changes
    /// it meanwhile), and each database of a `ProtectedStore` is copied by SQLite as of one
    /// committed transaction. Through an agent, use `AgentStore.createBackup`, which runs
    /// this in the agent with every other client's changes held: given an `AgentStore`
    /// directly, two files may come from different instants (`Keys/backup-format.md`, "One instant").
    ///
    /// - Parameters:
    ///   - store: the store to back up, in this process or through an agent.
    ///   - device: its device, whose class keys are checked before anything is written.
    ///   - output: where the archive goes.
    ///   - recipients: who can open it: X25519 recipients, or one passphrase.
    ///   - items: the store's items (``BackupItemSource``), `nil` for none.
    ///   - progress: called with the bytes of the archive written so far.
    /// - Returns: the entries written.
    @discardableResult
    public static func create(
        of store: some ProtectedFileSystem,
        device: any DeviceControlling,
        to output: BackupOutput,
        recipients: [AgeRecipient],
        items: (any BackupItemSource)? = nil,
        progress: @escaping (UInt64) -> Void = { _ in }
    ) throws(DataProtectionError) -> BackupSummary {
        let rootClass = try store.attributesOfItem(atPath: "/").protectionClass
        var entries: [(path: String, attributes: ProtectedItemAttributes)] = []
        try walk("", in: store, into: &entries)
        var unavailable: [String] = []
        var checked: [ProtectionClass: Bool] = [:]
        for (path, attributes) in entries where attributes.type == .file {
            let protectionClass = attributes.protectionClass ?? .default
            if checked[protectionClass] == nil { checked[protectionClass] = try device.isAvailable(protectionClass) }
            if checked[protectionClass] == false { unavailable.append("\(path) (\(protectionClass.rawValue))") }
        }
        guard unavailable.isEmpty else {
            let shown = unavailable.prefix(10).joined(separator: ", ") + (unavailable.count > 10 ? ", … (\(unavailable.count) in all)" : "")
            throw DataProtectionError(.protectedDataUnavailable, "Cannot back up: the class key of these files is not available: \(shown).",
                                      hint: "Unlock the device (dpctl unlock) and back up again; no archive was written.")
        }
        let itemsEntry = try items?.exportMigratableItems()

        // Three threads: the store's reads on this one, age's encryption on a second, the
        // output's writes on a third (the encrypting thread was the bottleneck with both).
        let writer = BackgroundOutput(output)
        let encryptor: AgeEncryptor
        do throws(DataProtectionError) {
            encryptor = try AgeEncryptor(recipients: recipients, output: writer.output)
        } catch {
            writer.cancel()
            throw error
        }
        let box = EncryptorBox(encryptor)
        let pipe = BackgroundPipe.consuming { (data: Data) throws(DataProtectionError) in try box.encryptor.write(data) }
        do throws(DataProtectionError) {
            let summary = try archive(entries, of: store, rootClass: rootClass, itemsEntry: itemsEntry, into: pipe, progress: progress)
            try pipe.finish()
            try encryptor.finish()
            try writer.finish()
            progress(encryptor.written)
            return BackupSummary(entries: summary.entries, archiveBytes: encryptor.written, contentBytes: summary.contentBytes,
                                 recipientTypes: recipients.map { $0.isPassphrase ? "scrypt" : "X25519" })
        } catch {
            pipe.cancel()
            writer.cancel()
            throw error
        }
    }

    /// Writes the tar stream of `entries` into `pipe`, in pieces of about 1 MiB.
    private static func archive(
        _ entries: [(path: String, attributes: ProtectedItemAttributes)], of store: some ProtectedFileSystem, rootClass: ProtectionClass?,
        itemsEntry: Data?, into pipe: BackgroundPipe, progress: @escaping (UInt64) -> Void
    ) throws(DataProtectionError) -> (entries: [BackupEntry], contentBytes: UInt64) {
        var written: [BackupEntry] = []
        var contentBytes: UInt64 = 0
        var skipped: Set<String> = []
        var batch = Data()
        var sent: UInt64 = 0
        func flush() throws(DataProtectionError) {
            guard !batch.isEmpty else { return }
            sent += UInt64(batch.count)
            try pipe.send(batch)
            batch = Data()
            progress(sent)
        }
        let tar = PaxTarWriter { (data: Data) throws(DataProtectionError) in
            if data.count >= pieceSize / 2 {
                try flush()
                sent += UInt64(data.count)
                try pipe.send(data)
                progress(sent)
            } else {
                batch.append(data)
                if batch.count >= pieceSize { try flush() }
            }
        }
        try tar.globalHeader(rootClass: rootClass)
        for (path, attributes) in entries {
            let time = Int64((attributes.modificationDate ?? Date()).timeIntervalSince1970)
            if attributes.type == .directory {
                try tar.directory(path, protectionClass: attributes.protectionClass, modificationTime: time)
                written.append(BackupEntry(path: path, kind: .directory, size: 0, protectionClass: attributes.protectionClass))
                continue
            }
            if skipped.contains(path) { continue }
            var handle = try store.fileHandle(forReadingAtPath: path)
            var archivedPath: String?
            do {
                if let local = store as? ProtectedStore, try isDatabase(handle) {
                    // A database: a copy of one committed instant, made by SQLite, stands for its main file and WAL or journal.
                    try handle.close()
                    archivedPath = try snapshot(ofDatabaseAt: path, in: local, protectionClass: attributes.protectionClass)
                    handle = try store.fileHandle(forReadingAtPath: archivedPath!)
                    skipped.insert(path + "-wal")
                    skipped.insert(path + "-journal")
                }
            } catch {
                try? handle.close()
                if let local = store as? ProtectedStore, local.fileExists(atPath: snapshotDirectory) { try? removeSnapshots(in: local) }
                throw error
            }
            defer { if archivedPath != nil, let local = store as? ProtectedStore { try? removeSnapshots(in: local) } }
            do {
                let size = try handle.size()
                var offset: UInt64 = 0
                try tar.file(path, size: size, protectionClass: attributes.protectionClass, modificationTime: time) { () throws(DataProtectionError) -> Data? in
                    guard offset < size else { return nil }
                    let piece = try handle.read(atOffset: offset, upToCount: Int(min(UInt64(pieceSize), size - offset)))
                    guard !piece.isEmpty else {
                        throw DataProtectionError(.integrityFailure, "\(path) shrank while it was archived.")
                    }
                    offset += UInt64(piece.count)
                    return piece
                }
                try handle.close()
                contentBytes += size
                written.append(BackupEntry(path: path, kind: .file, size: size, protectionClass: attributes.protectionClass))
            } catch {
                try? handle.close()
                throw error
            }
        }
        if let itemsEntry {
            var sent = false
            try tar.file(itemsEntryPath, size: UInt64(itemsEntry.count), protectionClass: .complete, modificationTime: Int64(Date().timeIntervalSince1970),
                         kind: BackupEntry.Kind.items.rawValue) { () throws(DataProtectionError) -> Data? in
                defer { sent = true }
                return sent ? nil : itemsEntry
            }
            written.append(BackupEntry(path: itemsEntryPath, kind: .items, size: UInt64(itemsEntry.count), protectionClass: .complete))
        }
        try tar.finish()
        try flush()
        return (written, contentBytes)
    }

    /// Whether the file open in `handle` is a SQLite database (its header string).
    private static func isDatabase(_ handle: some ProtectedFileHandling) throws(DataProtectionError) -> Bool {
        guard try handle.size() >= 512 else { return false }
        return try handle.read(atOffset: 0, upToCount: sqliteHeader.count) == sqliteHeader
    }

    /// Copies the database at `path` as of one committed instant (SQLite's backup API: one
    /// read transaction) into a database of the same class in the snapshot directory, whose
    /// path it returns. Memory: two page caches, whatever the size; disk: one copy at a time.
    private static func snapshot(ofDatabaseAt path: String, in store: ProtectedStore, protectionClass: ProtectionClass?)
        throws(DataProtectionError) -> String {
        if store.fileExists(atPath: snapshotDirectory) { try removeSnapshots(in: store) }
        try store.createDirectory(atPath: snapshotDirectory, withIntermediateDirectories: false, protection: .none)
        let copyPath = snapshotDirectory + "/" + snapshotName
        let source = try ProtectedDatabase(atPath: path, in: store)
        defer { source.close() }
        let copy = try ProtectedDatabase(atPath: copyPath, in: store, create: true, protection: ProtectionChoice(protectionClass))
        defer { copy.close() }
        // The copy is read once and removed: no journal, no sync.
        try copy.execute("PRAGMA journal_mode = OFF; PRAGMA synchronous = OFF")
        try source.copyWhole(into: copy)
        return copyPath
    }

    /// Removes what a backup left in the snapshot directory (a crash in the middle of one).
    private static func removeSnapshots(in store: ProtectedStore) throws(DataProtectionError) {
        for name in try store.contentsOfDirectory(atPath: snapshotDirectory) { try store.removeItem(atPath: snapshotDirectory + "/" + name) }
        try store.removeItem(atPath: snapshotDirectory)
    }

    /// Every directory and file below `directory`, parents before children, names sorted.
    private static func walk(
        _ directory: String, in store: some ProtectedFileSystem, into entries: inout [(path: String, attributes: ProtectedItemAttributes)]
    ) throws(DataProtectionError) {
        for name in try store.contentsOfDirectory(atPath: directory.isEmpty ? "/" : directory).sorted() {
            if directory.isEmpty && (name == RestoreStaging.name || name == snapshotDirectory) { continue }
            let path = directory.isEmpty ? name : directory + "/" + name
            let attributes = try store.attributesOfItem(atPath: path)
            entries.append((path, attributes))
            if attributes.type == .directory { try walk(path, in: store, into: &entries) }
        }
    }
}

/// Hands the encryptor to the encrypting thread: from then on only that thread uses it,
/// until ``BackgroundPipe/finish()`` or ``BackgroundPipe/cancel()`` has joined it.
private final class EncryptorBox: @unchecked Sendable {
    let encryptor: AgeEncryptor
    init(_ encryptor: AgeEncryptor) { self.encryptor = encryptor }
}
