import DataProtection
import Foundation

/// What a backup operation did: its entries and byte counts (dpctl's `--json` report).
public struct BackupSummary: Sendable, Codable, Hashable {
    /// The entries, in archive order.
    public var entries: [BackupEntry]
    /// Bytes of the archive (written by `create`, read by `restore` and `verify`).
    public var archiveBytes: UInt64
    /// Bytes of file content inside.
    public var contentBytes: UInt64
    /// The header's recipient stanza types (`X25519`, `scrypt`), for `verify`.
    public var recipientTypes: [String]

    /// Number of directories.
    public var directoryCount: Int { entries.filter { $0.kind == .directory }.count }
    /// Number of files.
    public var fileCount: Int { entries.filter { $0.kind == .file }.count }
}
