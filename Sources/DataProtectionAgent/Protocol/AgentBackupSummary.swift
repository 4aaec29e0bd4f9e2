import DataProtectionBackup
import Foundation

/// What an agent-side backup (``AgentStore/createBackup(to:recipients:includingItems:progress:)``)
/// wrote: the `backupCreate` reply (`Keys/agent-protocol.md` §6).
public struct AgentBackupSummary: Sendable, Hashable {
    /// Bytes of the archive.
    public var archiveBytes: UInt64
    /// Bytes of file content inside.
    public var contentBytes: UInt64
    /// Number of directories.
    public var directoryCount: Int
    /// Number of files (a database counts once: its copy of one instant).
    public var fileCount: Int
    /// Whether the archive has an items entry.
    public var hasItems: Bool

    init(_ summary: BackupSummary) {
        archiveBytes = summary.archiveBytes
        contentBytes = summary.contentBytes
        directoryCount = summary.directoryCount
        fileCount = summary.fileCount
        hasItems = summary.entries.contains { $0.kind == .items }
    }

    init(archiveBytes: UInt64, contentBytes: UInt64, directoryCount: Int, fileCount: Int, hasItems: Bool) {
        (self.archiveBytes, self.contentBytes, self.directoryCount, self.fileCount, self.hasItems) =
            (archiveBytes, contentBytes, directoryCount, fileCount, hasItems)
    }

    /// `u64` archive bytes, `u64` content bytes, `u32` directories, `u32` files, `bool` items entry.
    func encoded() -> [UInt8] {
        var writer = AgentFieldWriter()
        writer.u64(archiveBytes)
        writer.u64(contentBytes)
        writer.u32(UInt32(clamping: directoryCount))
        writer.u32(UInt32(clamping: fileCount))
        writer.bool(hasItems)
        return writer.bytes
    }

    static func decode(_ body: [UInt8]) throws(AgentProtocolViolation) -> AgentBackupSummary {
        var reader = AgentFieldReader(body)
        let summary = AgentBackupSummary(archiveBytes: try reader.u64(), contentBytes: try reader.u64(), directoryCount: Int(try reader.u32()),
                                         fileCount: Int(try reader.u32()), hasItems: try reader.bool())
        try reader.finish()
        return summary
    }
}
