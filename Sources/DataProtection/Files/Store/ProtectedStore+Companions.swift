import Foundation
import SystemPackage

/// Files that belong to another while it is open, beside it (a database's journal and WAL,
/// ``ProtectedFileHandle/moveCompanions(withSuffixes:)``): a move of the file takes them along
/// in a way a crash cannot part them (`semantics.md`, "Databases": a database follows its file).
extension ProtectedStore {
    /// Moves the file at `origin` to `target` with the files that belong to it (a database's
    /// journal and WAL): each of them is beside the file at every instant, so a crash never
    /// parts a database from a WAL holding its commits. Each companion gets its new name as a
    /// second link (bound to both places) before the file moves, and loses its old one after;
    /// a crash in between leaves a second name, which ``removeStrayLinks(besideFileAt:suffixes:)``
    /// clears. Open handles follow their files; no flush of any of them runs meanwhile.
    func moveFile(_ origin: Location, to target: Location, with companions: [(origin: Location, target: Location)]) throws(DataProtectionError) {
        waitForClosingFiles()
        var open: [(file: OpenFile, candidates: [FilePath])] = []
        for (location, destination) in [(origin, target)] + companions {
            if let file = openFile(for: location.disk) { open.append((file, [destination.disk, location.disk])) }
        }
        try OpenFile.changingPlaces(of: open, fileSystem: fileSystem) { () throws(DataProtectionError) in
            for companion in companions {
                let file = try DataFileDescriptor.open(companion.origin.disk, fileSystem: fileSystem)
                defer { file.close() }
                try FilePlaceRecords.bindBoth(file, companion.origin.place, companion.target.place, device: device)
                try fileSystem.link(companion.origin.disk, to: companion.target.disk)
                try moveJournal(of: companion.origin.disk, to: companion.target.disk)
            }
            try fileSystem.synchronizeDirectory(at: target.parentDisk)
            try FilePlaceRecords.move(fileAt: origin.disk, from: origin.place, to: target.place, device: device) { () throws(DataProtectionError) in
                try moveJournal(of: origin.disk, to: target.disk)
                try fileSystem.rename(origin.disk, to: target.disk)
                try fileSystem.removeFile(at: CommittedFile.journalPath(for: origin.disk))
                try synchronizeDirectories(of: origin, target)
            }
            for companion in companions {
                try fileSystem.removeFile(at: companion.origin.disk)
                try fileSystem.removeFile(at: CommittedFile.journalPath(for: companion.origin.disk))
            }
            try fileSystem.synchronizeDirectory(at: origin.parentDisk)
            for companion in companions {
                let file = try DataFileDescriptor.open(companion.target.disk, fileSystem: fileSystem)
                defer { file.close() }
                try FilePlaceRecords.bind(file, to: companion.target.place, device: device)
            }
        }
    }

    /// Before the file at `origin` gets the name `target`: a journal a crash left that it needs
    /// is copied beside `target` (durably); the caller removes the one at `origin` once the
    /// file has left that name.
    private func moveJournal(of origin: FilePath, to target: FilePath) throws(DataProtectionError) {
        let journal = CommittedFile.journalPath(for: origin)
        guard let pending = try fileSystem.readFile(at: journal, limit: FileJournal.maximumByteCount(recordStride: nil)) else { return }
        try AtomicFileWriter(fileSystem: fileSystem).write([.data(pending)], to: CommittedFile.journalPath(for: target))
    }

    /// After a crash cut a move of a file with its companions (a database and its journal or
    /// WAL): a companion of the file at `path` that has a second name in its directory loses
    /// that name (the one beside the file is the companion's; the other is where the file was
    /// or was going), and is bound to its place. What a database's first connection calls.
    package func removeStrayLinks(besideFileAt path: String, suffixes: [String]) throws(DataProtectionError) {
        let storePath = try StorePath(path)
        guard let name = storePath.name else { return }
        try namespace.locked { () throws(DataProtectionError) in
            for suffix in suffixes {
                guard let companion = try? locate(storePath.parent.appending(name + suffix)), companion.kind == .file,
                      let status = try fileSystem.status(at: companion.disk), status.linkCount > 1 else { continue }
                var removed = false
                for entry in try fileSystem.contentsOfDirectory(at: companion.parentDisk) where Self.isEntryName(entry) {
                    let other = companion.parentDisk.appending(entry)
                    guard other != companion.disk, try fileSystem.status(at: other)?.identity == status.identity else { continue }
                    try fileSystem.removeFile(at: other)
                    try? fileSystem.removeFile(at: CommittedFile.journalPath(for: other))
                    removed = true
                }
                guard removed else { continue }
                try fileSystem.synchronizeDirectory(at: companion.parentDisk)
                let file = try DataFileDescriptor.open(companion.disk, fileSystem: fileSystem)
                defer { file.close() }
                try FilePlaceRecords.bind(file, to: companion.place, device: device)
            }
        }
    }
}
