import DataProtection
import Foundation

extension Backup {
    /// Writes one archive of the whole of `store` to `output`, encrypted to `recipients`.
    ///
    /// Before a byte is written, every file's class is checked against `device`: if any class
    /// is unavailable the backup fails with `protectedDataUnavailable`, naming the files it
    /// could not read, and writes nothing. One instant: the archive holds the store as it is
    /// while this runs; in one process the caller owns the store (no other process changes
    /// it meanwhile); through an agent, see `Keys/backup-format.md`, "One instant".
    ///
    /// - Parameters:
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

        let encryptor = try AgeEncryptor(recipients: recipients, output: output)
        var written: [BackupEntry] = []
        var contentBytes: UInt64 = 0
        let tar = PaxTarWriter { (data: Data) throws(DataProtectionError) in
            try encryptor.write(data)
            progress(encryptor.written)
        }
        try tar.globalHeader(rootClass: rootClass)
        for (path, attributes) in entries {
            let time = Int64((attributes.modificationDate ?? Date()).timeIntervalSince1970)
            if attributes.type == .directory {
                try tar.directory(path, protectionClass: attributes.protectionClass, modificationTime: time)
                written.append(BackupEntry(path: path, kind: .directory, size: 0, protectionClass: attributes.protectionClass))
                continue
            }
            let handle = try store.fileHandle(forReadingAtPath: path)
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
        try encryptor.finish()
        progress(encryptor.written)
        return BackupSummary(entries: written, archiveBytes: encryptor.written, contentBytes: contentBytes,
                             recipientTypes: recipients.map { $0.isPassphrase ? "scrypt" : "X25519" })
    }

    /// Every directory and file below `directory`, parents before children, names sorted.
    private static func walk(
        _ directory: String, in store: some ProtectedFileSystem, into entries: inout [(path: String, attributes: ProtectedItemAttributes)]
    ) throws(DataProtectionError) {
        for name in try store.contentsOfDirectory(atPath: directory.isEmpty ? "/" : directory).sorted() {
            if directory.isEmpty && name == RestoreStaging.name { continue }
            let path = directory.isEmpty ? name : directory + "/" + name
            let attributes = try store.attributesOfItem(atPath: path)
            entries.append((path, attributes))
            if attributes.type == .directory { try walk(path, in: store, into: &entries) }
        }
    }
}
