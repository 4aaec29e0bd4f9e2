import DataProtection
import Foundation

/// Backups of a whole store in the age format (`Keys/backup-format.md`, `Docs/Backups.md`):
/// an age v1 file (X25519 or scrypt recipients, readable by the real `age -d`) whose payload
/// is a POSIX pax tar of the store's tree, each entry's protection class in a pax header.
///
/// Every operation streams with constant memory (one 64 KiB chunk and one 1 MiB piece at a
/// time) and works on any `ProtectedFileSystem`: a `ProtectedStore` in this process or
/// an `AgentStore` through the agent.
public enum Backup {
    /// Pieces read from and written to the store.
    static let pieceSize = 1 << 20
    /// The largest items entry a restore accepts: 64 MiB.
    static let itemsEntryLimit: UInt64 = 64 << 20
    /// Where `create` copies a database as of one instant before archiving the copy (at the
    /// store's root; never archived; removed after each database).
    package static let snapshotDirectory = ".dataprotection-backup"
    /// The copy's name in ``snapshotDirectory``.
    static let snapshotName = "database"
    /// The first 16 bytes of a SQLite database.
    static let sqliteHeader = Data("SQLite format 3\u{0}".utf8)
    /// The items entry's path in the archive.
    public static let itemsEntryPath = ".dataprotection/items"
}
