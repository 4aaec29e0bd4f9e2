import Foundation

/// The store's one reserved top-level directory, where the keychain's item databases live
/// (`Keys/items.md` §2). The store's own file operations refuse every path in it
/// (`invalidPath`) and the root's listing leaves it out, so that items never show up as
/// files one could clobber by accident with `ls`, `rm`, `mv` or `put`. Only code that binds
/// ``isOpen`` (the item databases' SQLite storage) reaches it.
package enum ReservedStoreArea {
    /// The reserved directory's name, at the store's root.
    package static let itemsDirectory = ".dataprotection-items"
    /// The directory, inside ``itemsDirectory``, of the items that exist only while a passcode
    /// is set: renamed away at once (one atomic step) when the passcode is removed.
    package static let passcodeBoundDirectory = "passcode"
    /// The prefix of a passcode-bound directory renamed away, whose files are still to remove.
    package static let discardedPrefix = "discarded-"

    /// Whether the current task (or thread) may reach the reserved directory.
    @TaskLocal package static var isOpen = false

    /// Runs `body` with the reserved directory reachable through the store's operations.
    package static func withAccess<R, E: Error>(_ body: () throws(E) -> R) throws(E) -> R {
        if isOpen { return try body() }
        let result: Result<R, E> = $isOpen.withValue(true) {
            do throws(E) { return .success(try body()) } catch { return .failure(error) }
        }
        return try result.get()
    }

    /// Whether `components` (a parsed store path) lie in the reserved directory.
    static func contains(_ components: [String]) -> Bool {
        components.first == itemsDirectory
    }
}

extension ProtectedStore {
    /// Removes the passcode-bound items (`whenPasscodeSetThisDeviceOnly`): their directory is
    /// renamed away in one atomic, durable step, then its files are removed. Called when the
    /// passcode is about to be removed (after the old passcode was verified), and by the
    /// keychain when it finds the device without a passcode. Nothing to do without such items.
    package func discardPasscodeBoundItems() throws(DataProtectionError) {
        try ReservedStoreArea.withAccess { () throws(DataProtectionError) in
            let area = "/" + ReservedStoreArea.itemsDirectory
            let bound = area + "/" + ReservedStoreArea.passcodeBoundDirectory
            if fileExists(atPath: bound) {
                let discarded = area + "/" + ReservedStoreArea.discardedPrefix + UUID().uuidString.lowercased()
                try moveItem(atPath: bound, toPath: discarded)
            }
            try removeDiscardedItemAreas()
        }
    }

    /// Removes what earlier discards of passcode-bound items renamed away (a discard cut by a
    /// crash leaves it, under a name no lookup reads).
    package func removeDiscardedItemAreas() throws(DataProtectionError) {
        try ReservedStoreArea.withAccess { () throws(DataProtectionError) in
            let area = "/" + ReservedStoreArea.itemsDirectory
            guard fileExists(atPath: area) else { return }
            for name in try contentsOfDirectory(atPath: area) where name.hasPrefix(ReservedStoreArea.discardedPrefix) {
                let directory = area + "/" + name
                for entry in try contentsOfDirectory(atPath: directory) {
                    try removeItem(atPath: directory + "/" + entry)
                }
                try removeItem(atPath: directory)
            }
        }
    }
}
