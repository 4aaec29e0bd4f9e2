import Foundation

/// The staging area of a backup restore and its one visible step (`Keys/backup-format.md`,
/// "Restore"): a restore writes the whole tree under `/.dataprotection-restore/tree` (hidden
/// work in progress, thrown away if anything fails), then writes the commit mark
/// `/.dataprotection-restore/committed` (class `none`, the root's class inside) in one
/// atomic, durable write. That write is the step that makes the restore happen: from it on,
/// the restore is finished (root class set, each top entry moved into the root, the staging
/// directory removed) by whoever gets there first: the restore itself, or the next opening
/// of the store after a crash. Without the mark, the next opening removes the staging
/// directory: the target is as it was (empty).
package enum RestoreStaging {
    /// The staging directory's name at the root (reserved: a backup never holds it).
    package static let name = ".dataprotection-restore"
    /// Where the restored tree is built.
    package static let tree = name + "/tree"
    /// The commit mark.
    package static let mark = name + "/committed"

    /// The target holds nothing but, possibly, an earlier restore's staging directory.
    package static func isEmpty(_ store: some ProtectedFileSystem) throws(DataProtectionError) -> Bool {
        try store.contentsOfDirectory(atPath: "/").allSatisfy { $0 == name }
    }

    /// Writes the commit mark (the atomic step), then finishes the restore.
    package static func commit(in store: some ProtectedFileSystem, rootClass: ProtectionClass?) throws(DataProtectionError) {
        try store.write(Data((rootClass?.rawValue ?? "").utf8), to: mark, protection: .none, options: [])
        try finishCommitted(in: store)
    }

    /// After a crash: finishes a committed restore, or removes an uncommitted one's staging.
    package static func recover(in store: some ProtectedFileSystem) throws(DataProtectionError) {
        guard store.fileExists(atPath: name) else { return }
        if store.fileExists(atPath: mark) {
            try finishCommitted(in: store)
        } else {
            try discard(in: store)
        }
    }

    /// Removes the staging directory and everything in it.
    package static func discard(in store: some ProtectedFileSystem) throws(DataProtectionError) {
        guard store.fileExists(atPath: name) else { return }
        try removeTree(name, in: store)
    }

    private static func finishCommitted(in store: some ProtectedFileSystem) throws(DataProtectionError) {
        let recorded = String(decoding: try store.contents(atPath: mark), as: UTF8.self)
        if let rootClass = ProtectionClass(rawValue: recorded) {
            try store.setProtectionClass(rootClass, ofItemAtPath: "/")
        }
        if store.fileExists(atPath: tree) {
            for entry in try store.contentsOfDirectory(atPath: tree) {
                try store.moveItem(atPath: tree + "/" + entry, toPath: entry)
            }
            try store.removeItem(atPath: tree)
        }
        try store.removeItem(atPath: mark)
        try store.removeItem(atPath: name)
    }

    private static func removeTree(_ path: String, in store: some ProtectedFileSystem) throws(DataProtectionError) {
        if try store.attributesOfItem(atPath: path).type == .directory {
            for entry in try store.contentsOfDirectory(atPath: path) { try removeTree(path + "/" + entry, in: store) }
        }
        try store.removeItem(atPath: path)
    }
}
