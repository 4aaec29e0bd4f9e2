import DataProtection
import Foundation

/// THE hook between backups and keychain items (issue 36): what a store gives a backup of
/// its items, and takes back on restore. `Keys/backup-format.md`, "Items", defines the bytes:
/// the `.dataprotection/items` entry of the archive.
///
/// The items API connects here (one conformance, e.g. of its item store); until then a
/// backup has no items entry, and a restore of an archive that has one fails with
/// `invalidArgument` rather than dropping items silently.
public protocol BackupItemSource: Sendable {
    /// Every item that may migrate (never a `…ThisDeviceOnly` one), encoded as the items
    /// entry; `nil` when there is none. Fails with `protectedDataUnavailable` naming what
    /// could not be read when an item's class key is not in memory.
    func exportMigratableItems() throws(DataProtectionError) -> Data?

    /// Adds the items of an items entry to the (empty) target store.
    func importItems(_ entry: Data) throws(DataProtectionError)
}
