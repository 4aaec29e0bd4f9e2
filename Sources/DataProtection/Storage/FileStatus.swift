import Foundation

/// What `stat` says about one file-system entry, without following a final symbolic link.
package struct FileStatus: Sendable, Hashable {
    /// The type of an entry: the store only ever makes regular files and directories.
    package enum Kind: Sendable, Hashable {
        case regular
        case directory
        /// A symbolic link, device, socket or pipe: never made by DataProtection.
        case other
    }

    package let kind: Kind
    package let identity: FileIdentity
    package let size: Int64
    package let modificationDate: Date
    /// How many names the file has (`st_nlink`): more than one only while a move of a
    /// database's side file is in flight, or after a crash cut one (``FileSystem/link(_:to:)``).
    package let linkCount: Int

    package init(kind: Kind, identity: FileIdentity, size: Int64, modificationDate: Date, linkCount: Int = 1) {
        self.kind = kind
        self.identity = identity
        self.size = size
        self.modificationDate = modificationDate
        self.linkCount = linkCount
    }
}

/// A file's identity on disk: open handles on the same file share one ``OpenFile``.
package struct FileIdentity: Hashable, Sendable {
    package let device: UInt64
    package let inode: UInt64

    package init(device: UInt64, inode: UInt64) {
        self.device = device
        self.inode = inode
    }
}
