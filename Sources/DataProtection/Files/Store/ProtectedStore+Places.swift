import Foundation
import SystemPackage

extension ProtectedStore {
    /// Pairs the data directory with the device (``StoreIdentity``), binds every entry of a
    /// store written before places (layout 1) to where it is, records the identity at the
    /// current layout, and creates the root's metadata if it is missing.
    ///
    /// The binding is idempotent and the layout is recorded only once it is complete, so a
    /// migration cut short (a crash, a power cut) is simply done again at the next open.
    func openRoot() throws(DataProtectionError) {
        let pairing = try StoreIdentity.pair(root: root, device: device)
        if pairing.needsPlaces {
            try namespace.locked { () throws(DataProtectionError) in
                try bindEntriesMadeBeforePlaces(in: root, place: .root)
                forgetDirectories()
            }
            device.logger.notice("bound every entry of a store made before places (store layout 1 to 2)")
        }
        try StoreIdentity.record(pairing, root: root, device: device)
        try prepareRoot()
    }

    /// Binds every entry inside the directory at `disk` to its place, recursively, then the
    /// directory itself (its `dpdir`) to `place`. Nothing is decrypted but names; no class key
    /// is needed.
    ///
    /// Only a directory whose authenticated `dpdir` is still at version 1 is bound: one at
    /// version 2 is at layout 2 with everything in it (its `dpdir` is written last), and is
    /// left as it is. So a missing or layout-1 `store-id` beside a store at layout 2 (deleted,
    /// or planted) binds nothing: entries exchanged on disk stay refused, never re-bound
    /// (`Keys/file-format.md` §11.4).
    private func bindEntriesMadeBeforePlaces(in disk: FilePath, place: Place) throws(DataProtectionError) {
        let metadataPath = disk.appending(DirectoryMetadata.fileName)
        guard let data = try fileSystem.readFile(at: metadataPath, limit: smallFileByteLimit) else {
            throw .integrity("A store directory has lost its metadata: the store was tampered with.")
        }
        let metadata = try DirectoryMetadata.decode(data, device: device)
        guard metadata.places.isEmpty else { return }
        for entry in try fileSystem.contentsOfDirectory(at: disk) where Self.isEntryName(entry) {
            guard let name = try NameCipher.decrypt(entry, directoryID: metadata.id, device: device) else {
                throw .integrity("A store directory holds an entry whose name does not decrypt: the store was tampered with.")
            }
            let child = Place(directoryID: metadata.id, name: name)
            switch try kind(of: disk.appending(entry)) {
            case .file:
                let file = try DataFileDescriptor.open(disk.appending(entry), fileSystem: fileSystem)
                defer { file.close() }
                try FilePlaceRecords.bind(file, to: child, device: device)
            case .directory:
                try bindEntriesMadeBeforePlaces(in: disk.appending(entry), place: child)
            case .missing:
                continue
            }
        }
        try AtomicFileWriter(fileSystem: fileSystem).write([.data(metadata.placed(place, place, device: device).encoded(device: device))],
                                                          to: metadataPath)
    }
}

extension ProtectedStore {
    /// Where `file` is now in the store (it follows moves of itself and of the directories
    /// above it), or `nil` once it was removed (or replaced) while open. Read under the
    /// name-space lock, so no move is half done, without counting as a change (the memo of
    /// `fileExists` stays); the on-disk names are decrypted from the root down, and the
    /// answer remembered by the file until the name space changes.
    func currentPath(of file: OpenFile) throws(DataProtectionError) -> StorePath? {
        try namespace.reading { changes throws(DataProtectionError) -> StorePath? in
            let (disk, unlinked, closed, memo) = file.lock.locked { (file.disk.file.path, file.disk.unlinked, file.closed, file.placeMemo) }
            guard !closed else { throw DataProtectionError(.handleClosed, "The file was closed.") }
            guard !unlinked else { return nil }
            if let memo, memo.changes == changes, memo.disk == disk { return memo.path }
            guard disk.starts(with: root) else { return nil }
            let components = disk.components.dropFirst(root.components.count).map(\.string)
            var directory = root
            var metadata = try directoryMetadata(at: root, place: .root)
            var names: [String] = []
            for (position, component) in components.enumerated() {
                guard let name = try NameCipher.decrypt(component, directoryID: metadata.id, device: device) else {
                    throw .integrity("A store directory holds an entry whose name does not decrypt: the store was tampered with.")
                }
                names.append(name)
                if position < components.count - 1 {
                    directory = directory.appending(component)
                    metadata = try directoryMetadata(at: directory, place: Place(directoryID: metadata.id, name: name))
                }
            }
            let path = StorePath(components: names)
            file.lock.locked { file.placeMemo = (changes, disk, path) }
            return path
        }
    }
}
