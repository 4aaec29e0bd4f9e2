import DataProtection
import Foundation

extension Backup {
    /// Authenticates the whole archive (header, every chunk, the last-chunk flag, nothing
    /// after it) and checks its tar stream as a restore would, writing nothing.
    ///
    /// - Returns: the entries with their classes.
    /// - Throws: `integrityFailure` as ``restore(from:identities:into:items:progress:)`` would.
    public static func verify(
        from input: BackupInput, identities: [AgeIdentity], progress: @escaping (UInt64) -> Void = { _ in }
    ) throws(DataProtectionError) -> BackupSummary {
        let decryptor = try AgeDecryptor(identities: identities, input: input)
        let plaintext = AgePlaintextReader(decryptor)
        defer { plaintext.close() }
        let tar = PaxTarReader(plaintext, progress: progress)
        var entries: [BackupEntry] = []
        var seen: Set<String> = []
        var contentBytes: UInt64 = 0
        while let entry = try tar.next() {
            guard seen.insert(entry.path).inserted else { throw TarFormat.foreign("\(entry.path) appears twice") }
            guard entry.path != RestoreStaging.name, !entry.path.hasPrefix(RestoreStaging.name + "/") else {
                throw TarFormat.foreign("the reserved name \(RestoreStaging.name)")
            }
            if entry.kind == .items, entry.size > itemsEntryLimit { throw TarFormat.foreign("an items entry too large") }
            entries.append(entry)
            if entry.kind == .file { contentBytes += entry.size }
            while try !tar.content(upTo: pieceSize).isEmpty {}
        }
        plaintext.close()
        return BackupSummary(entries: entries, archiveBytes: decryptor.consumed, contentBytes: contentBytes,
                             recipientTypes: decryptor.stanzaTypes)
    }
}
