import Foundation
import SodiumBridge
import SystemPackage

extension ProtectedStore {
    // MARK: - Whole-file reading and writing

    /// Writes `data` to the file at `path`, atomically (a crash leaves the old
    /// file or the new one), creating missing parent directories.
    ///
    /// The class is `protection`, else the file-protection option in `options`
    /// (`.completeFileProtection`, …), else the class of the file being replaced
    /// (replacing content never lowers protection), else the directory's class,
    /// else `completeUntilFirstUserAuthentication`. Writing needs only what
    /// creating a file of that class needs, so a `completeUnlessOpen` file can
    /// be written while locked. `.withoutOverwriting` fails with `fileExists`
    /// if the file exists. Writes are always atomic, with or without `.atomic`.
    public func write(
        _ data: Data, to path: String, protection: ProtectionChoice = .inherited, options: Data.WritingOptions = []
    ) throws(DataProtectionError) {
        try writeFile(at: path, protection: protection.protectionClass ?? ProtectionClass(writingOptions: options),
                      exclusive: options.contains(.withoutOverwriting)) { writer throws(DataProtectionError) in
            try writer.append(data)
        }
    }

    /// Writes a file from chunks produced by `next` (called until it returns `nil`),
    /// with constant memory; same rules as ``write(_:to:protection:options:)-9mrrg``.
    /// A source that throws stores nothing: its error is thrown as it is.
    public func write(
        to path: String, protection: ProtectionChoice = .inherited, exclusive: Bool = false,
        from next: () throws(DataProtectionError) -> Data?
    ) throws(DataProtectionError) {
        try writeFile(at: path, protection: protection.protectionClass, exclusive: exclusive) { writer throws(DataProtectionError) in
            while let data = try next() { try writer.append(data) }
        }
    }

    /// Creates or atomically replaces the file at `path` with what `fill` writes.
    @discardableResult
    func writeFile(
        at path: String, protection: ProtectionClass?, exclusive: Bool,
        _ fill: (ProtectedFileWriter) throws(DataProtectionError) -> Void
    ) throws(DataProtectionError) -> UInt64 {
        let writer = try prepareWriter(at: path, protection: protection, exclusive: exclusive)
        try fill(writer)
        return try commit(writer, exclusive: exclusive)
    }

    /// Resolves `path` (creating missing parents), picks the class and starts a
    /// writer on a temporary file beside the target. The content is encrypted
    /// outside the name-space lock; ``commit(_:exclusive:)`` takes it again.
    func prepareWriter(at path: String, protection: ProtectionClass?, exclusive: Bool) throws(DataProtectionError) -> ProtectedFileWriter {
        let storePath = try StorePath(path)
        guard !storePath.isRoot else { throw DataProtectionError(.isADirectory, "The store root is a directory.") }
        try storePath.requireCreatable(rootByteCount: root.string.utf8.count)
        return try namespace.locked { () throws(DataProtectionError) -> ProtectedFileWriter in
            try checkCreatableBeforeMakingParents(storePath, protection: protection)
            let parent = try makeDirectories(storePath.parent, protection: nil)
            let location = try locate(storePath)
            var protectionClass = protection
            switch location.kind {
            case .directory:
                throw DataProtectionError(.isADirectory, "\(storePath) is a directory.")
            case .file:
                if exclusive { throw DataProtectionError(.fileExists, "\(storePath) already exists.") }
                // Replacing content never silently lowers protection.
                // A tampered class byte must not choose the new file's class: authenticate it if possible.
                if protectionClass == nil { protectionClass = try OpenFile.verifiedClass(at: location.disk, place: location.place, device: device) }
            case .missing:
                break
            }
            return try ProtectedFileWriter(target: location.disk, place: location.place, storePath: storePath,
                                           protectionClass: protectionClass ?? parent.protectionClass ?? .default, device: device)
        }
    }

    /// Renames a finished writer's file into place, durably.
    @discardableResult
    func commit(_ writer: ProtectedFileWriter, exclusive: Bool) throws(DataProtectionError) -> UInt64 {
        try namespace.locked { () throws(DataProtectionError) -> UInt64 in
            if exclusive, try kind(of: writer.target) != .missing {
                throw DataProtectionError(.fileExists, "\(writer.storePath) already exists.")
            }
            let length = writer.length
            // A file replaced while open stays with its handles, unlinked.
            try changingPlace(of: writer.target, candidates: [writer.target]) { () throws(DataProtectionError) in
                try writer.commit()
            }
            return length
        }
    }

    /// The contents of the file at `path`.
    ///
    /// - Throws: `protectedDataUnavailable` when the file's class key is not available
    ///   (a `completeUnlessOpen` file stays readable while a handle on it is open);
    ///   `integrityFailure` when the file was tampered with.
    public func contents(atPath path: String) throws(DataProtectionError) -> Data {
        let file = try acquireFile(atPath: path)
        defer { try? release(file) }
        return try file.read(at: 0, count: Int(file.currentSize))
    }

    /// The shared open file at `path` (a file, not a directory).
    func acquireFile(atPath path: String) throws(DataProtectionError) -> OpenFile {
        let storePath = try StorePath(path)
        return try namespace.locked { () throws(DataProtectionError) -> OpenFile in
            let location = try locate(storePath)
            switch location.kind {
            case .missing: throw DataProtectionError(.fileNotFound, "No such file: \(storePath).")
            case .directory: throw DataProtectionError(.isADirectory, "\(storePath) is a directory.")
            case .file: return try acquire(location)
            }
        }
    }

    // MARK: - Existence and attributes

    /// Whether something exists at `path` (works in every lock state).
    public func fileExists(atPath path: String) -> Bool {
        var isDirectory = false
        return fileExists(atPath: path, isDirectory: &isDirectory)
    }

    /// Whether something exists at `path`, and whether it is a directory.
    public func fileExists(atPath path: String, isDirectory: inout Bool) -> Bool {
        guard let kind = try? namespace.lookUp(path, resolve: { () throws(DataProtectionError) in try locate(StorePath(path)).kind })
        else { return false }
        isDirectory = kind == .directory
        return kind != .missing
    }

    /// The attributes of the item at `path`: type, size, class and dates (works in every lock state).
    public func attributesOfItem(atPath path: String) throws(DataProtectionError) -> ProtectedItemAttributes {
        let storePath = try StorePath(path)
        return try namespace.locked { () throws(DataProtectionError) -> ProtectedItemAttributes in
            let location = try locate(storePath)
            let modification = (try? fileSystem.status(at: location.disk))??.modificationDate
            switch location.kind {
            case .missing:
                throw DataProtectionError(.fileNotFound, "No such file or directory: \(storePath).")
            case .directory:
                // The class its new files take: the one it records, else (the root until its class is
                // set, or a directory made under such parents) the default. No ancestor's: a directory
                // keeps the class it took when it was made, whatever is set above it later.
                let protectionClass = try directoryMetadata(at: location.disk, place: location.place).protectionClass
                return ProtectedItemAttributes(type: .directory, size: 0, protectionClass: protectionClass ?? .default,
                                               creationDate: nil, modificationDate: modification)
            case .file:
                let header = try OpenFile.peekHeader(at: location.disk, place: location.place, device: device)
                let size = openFile(for: location.disk)?.currentSize ?? header.length
                return ProtectedItemAttributes(
                    type: .file, size: size, protectionClass: header.protectionClass,
                    creationDate: Date(timeIntervalSince1970: Double(header.creationTime) / 1e9), modificationDate: modification)
            }
        }
    }

    /// Foundation-style attributes: `.type`, `.size`, `.protectionKey`, `.creationDate`, `.modificationDate`.
    public func attributesOfItemAsDictionary(atPath path: String) throws(DataProtectionError) -> [FileAttributeKey: Any] {
        try attributesOfItem(atPath: path).dictionary
    }

    // MARK: - Classes

    /// Changes the class of the file at `path`: its key is rewrapped (the content is
    /// not re-encrypted), atomically. Needs the old class key (or the file open, for
    /// class B) and what creating a file of the new class needs. For a directory,
    /// changes the default class of what is created in it later, and nothing inside.
    public func setProtectionClass(_ protectionClass: ProtectionClass, ofItemAtPath path: String) throws(DataProtectionError) {
        let storePath = try StorePath(path)
        try namespace.locked { () throws(DataProtectionError) in
            let location = try locate(storePath)
            switch location.kind {
            case .missing:
                throw DataProtectionError(.fileNotFound, "No such file or directory: \(storePath).")
            case .directory:
                var metadata = try directoryMetadata(at: location.disk, place: location.place)
                metadata.protectionClass = protectionClass
                try AtomicFileWriter(fileSystem: fileSystem).write(
                    [.data(metadata.encoded(device: device))], to: location.disk.appending(DirectoryMetadata.fileName))
                state.withLock { $0.directories[location.disk] = metadata }
            case .file:
                let file = try acquire(location)
                defer { try? release(file) }
                if file.protectionClass == .none && protectionClass != .none {
                    // Away from `none`: a new key and new ciphertext (the old header opens with device
                    // secrets alone). The file becomes a new on-disk file: its open entry follows it.
                    let before = file.identity
                    try file.reencrypt(to: protectionClass, place: location.place, storePath: storePath)
                    reidentify(file, from: before)
                } else {
                    try file.changeClass(to: protectionClass)
                }
            }
        }
    }

    /// Foundation-style: applies `.protectionKey` (a `FileProtectionType`); other keys are `invalidArgument`.
    public func setAttributes(_ attributes: [FileAttributeKey: Any], ofItemAtPath path: String) throws(DataProtectionError) {
        for key in attributes.keys where key != .protectionKey {
            throw .invalidArgument("Only the protection attribute can be set (not \(key.rawValue)).")
        }
        guard let value = attributes[.protectionKey] else { return }
        let type = (value as? FileProtectionType) ?? (value as? String).map { FileProtectionType(rawValue: $0) }
        guard let type, let protectionClass = ProtectionClass(type) else {
            throw .invalidArgument("Unknown protection type \(value).")
        }
        try setProtectionClass(protectionClass, ofItemAtPath: path)
    }

    // MARK: - Remove, move, copy

    /// Removes the file or empty directory at `path` (works in every lock state).
    public func removeItem(atPath path: String) throws(DataProtectionError) {
        let storePath = try StorePath(path)
        guard !storePath.isRoot else { throw .invalidArgument("The store root cannot be removed.") }
        try namespace.locked { () throws(DataProtectionError) in
            let location = try locate(storePath)
            switch location.kind {
            case .missing:
                throw DataProtectionError(.fileNotFound, "No such file or directory: \(storePath).")
            case .file:
                // Its handles go on with the unlinked file.
                try changingPlace(of: location.disk, candidates: [location.disk]) { () throws(DataProtectionError) in
                    try fileSystem.removeFile(at: location.disk)
                    try fileSystem.removeFile(at: CommittedFile.journalPath(for: location.disk))
                }
            case .directory:
                let entries = try fileSystem.contentsOfDirectory(at: location.disk).filter(Self.isEntryName)
                guard entries.isEmpty else { throw DataProtectionError(.directoryNotEmpty, "\(storePath) is not empty.") }
                // Out of sight first (atomic), then gone.
                let doomed = location.parentDisk.appending(AtomicFileWriter.temporaryPrefix + "rm-" + Base64URL.encode(Random.bytes(count: 9)))
                try fileSystem.rename(location.disk, to: doomed)
                try? fileSystem.removeTree(at: doomed)
                _ = state.withLock { $0.directories.removeValue(forKey: location.disk) }
            }
            try fileSystem.synchronizeDirectory(at: location.parentDisk)
        }
    }

    /// Moves (renames) the item at `source` to `destination`, whose parent must exist;
    /// fails with `fileExists` if `destination` exists. Works in every lock state:
    /// only the encrypted name changes.
    public func moveItem(atPath source: String, toPath destination: String) throws(DataProtectionError) {
        let from = try StorePath(source)
        let to = try StorePath(destination)
        guard !from.isRoot, !to.isRoot else { throw .invalidArgument("The store root cannot be moved.") }
        try namespace.locked { () throws(DataProtectionError) in
            let origin = try locate(from)
            guard origin.kind != .missing else { throw DataProtectionError(.fileNotFound, "No such file or directory: \(from).") }
            let target = try locate(to)
            guard target.kind == .missing else { throw DataProtectionError(.fileExists, "\(to) already exists.") }
            if origin.kind == .directory, to.components.starts(with: from.components) {
                throw DataProtectionError.invalidArgument("Cannot move \(from) into itself.")
            }
            if origin.kind == .directory {
                let below = try treeExtent(at: origin.disk)
                try to.requireCreatable(rootByteCount: root.string.utf8.count, depthBelow: below.depth, lengthBelow: below.length)
            } else {
                try to.requireCreatable(rootByteCount: root.string.utf8.count)
            }
            if origin.kind == .file {
                // Files beside an open file that belong to it (a database's journal and WAL) move with it.
                var companions: [(origin: Location, target: Location)] = []
                for suffix in openFile(for: origin.disk)?.companionSuffixes ?? [] {
                    guard let name = from.name, let targetName = to.name,
                          let companion = try? locate(from.parent.appending(name + suffix)), companion.kind == .file,
                          let companionTarget = try? locate(to.parent.appending(targetName + suffix)), companionTarget.kind == .missing
                    else { continue }
                    companions.append((companion, companionTarget))
                }
                if companions.isEmpty {
                    try moveFile(origin, to: target)
                } else {
                    try moveFile(origin, to: target, with: companions)
                }
            } else {
                try moveDirectory(origin, to: target)
            }
        }
    }

    /// Renames the file at `origin` to `target` (missing) and rebinds it to its new place.
    private func moveFile(_ origin: Location, to target: Location) throws(DataProtectionError) {
        try FilePlaceRecords.move(fileAt: origin.disk, from: origin.place, to: target.place, device: device) { () throws(DataProtectionError) in
            // Handles follow their file; no flush of it runs meanwhile (its journal stays beside it).
            try changingPlace(of: origin.disk, candidates: [target.disk, origin.disk]) { () throws(DataProtectionError) in
                let journal = CommittedFile.journalPath(for: origin.disk)
                if let pending = try fileSystem.readFile(at: journal, limit: FileJournal.maximumByteCount(recordStride: nil)) {
                    // A crash left a journal the file needs: it must be beside the file at every
                    // instant, so a durable copy goes first and the original last.
                    try AtomicFileWriter(fileSystem: fileSystem).write([.data(pending)], to: CommittedFile.journalPath(for: target.disk))
                    try fileSystem.rename(origin.disk, to: target.disk)
                    try fileSystem.removeFile(at: journal)
                } else {
                    try fileSystem.rename(origin.disk, to: target.disk)
                }
            }
            try synchronizeDirectories(of: origin, target)
        }
    }

    /// Makes a rename from `origin` to `target` durable.
    func synchronizeDirectories(of origin: Location, _ target: Location) throws(DataProtectionError) {
        try fileSystem.synchronizeDirectory(at: target.parentDisk)
        if target.parentDisk != origin.parentDisk {
            try fileSystem.synchronizeDirectory(at: origin.parentDisk)
        }
    }

    /// Renames a directory and rebinds it (its `dpdir`) to its new place: bound to both places
    /// before the rename, to the new one only after it, so a crash leaves it bound wherever it is.
    private func moveDirectory(_ origin: Location, to target: Location) throws(DataProtectionError) {
        let metadata = try directoryMetadata(at: origin.disk, place: origin.place)
        let metadataPath = origin.disk.appending(DirectoryMetadata.fileName)
        let writer = AtomicFileWriter(fileSystem: fileSystem)
        try writer.write([.data(metadata.placed(origin.place, target.place, device: device).encoded(device: device))], to: metadataPath)
        forgetDirectories()
        // Handles follow their files: every open file inside now lives under the new name (and no
        // flush of one runs during the rename, or its journal could land under the old name).
        waitForClosingFiles()
        var inside: [(file: OpenFile, candidates: [FilePath])] = []
        for file in state.withLock({ $0.openFiles.values.map(\.file) }) {
            let path = file.path
            guard path.starts(with: origin.disk) else { continue }
            var moved = target.disk
            for component in path.components.dropFirst(origin.disk.components.count) { moved.append(component) }
            inside.append((file, [moved, path]))
        }
        try OpenFile.changingPlaces(of: inside, fileSystem: fileSystem) { () throws(DataProtectionError) in
            try fileSystem.rename(origin.disk, to: target.disk)
        }
        try synchronizeDirectories(of: origin, target)
        try writer.write([.data(metadata.placed(target.place, target.place, device: device).encoded(device: device))],
                         to: target.disk.appending(DirectoryMetadata.fileName))
    }

    /// Copies the file at `source` to `destination` (which must not exist), in the
    /// source's class unless `protection` is given. Needs the source's class key.
    public func copyItem(atPath source: String, toPath destination: String, protection protectionChoice: ProtectionChoice = .inherited) throws(DataProtectionError) {
        let protection = protectionChoice.protectionClass
        let from = try StorePath(source)
        let to = try StorePath(destination)
        try to.requireCreatable(rootByteCount: root.string.utf8.count)
        try namespace.locked { () throws(DataProtectionError) in
            let origin = try locate(from)
            switch origin.kind {
            case .missing: throw DataProtectionError(.fileNotFound, "No such file: \(from).")
            case .directory: throw DataProtectionError(.isADirectory, "\(from) is a directory: only files can be copied.")
            case .file: break
            }
            switch try locate(to.parent).kind {
            case .directory: break
            case .file: throw DataProtectionError(.notADirectory, "\(to.parent) is a file, not a directory.")
            case .missing: throw DataProtectionError(.fileNotFound, "No such directory: \(to.parent).")
            }
            guard try locate(to).kind == .missing else { throw DataProtectionError(.fileExists, "\(to) already exists.") }
            let file = try acquire(origin)
            defer { try? release(file) }
            let size = file.currentSize
            try writeFile(at: destination, protection: protection ?? file.protectionClass, exclusive: true) { writer throws(DataProtectionError) in
                var offset: UInt64 = 0
                while offset < size {
                    let piece = try file.read(at: offset, count: 1 << 20)
                    guard !piece.isEmpty else { break }
                    try writer.append(piece, wipingAfterUse: true)  // plaintext passing through
                    offset += UInt64(piece.count)
                }
            }
        }
    }

    // MARK: - Directories

    /// Creates a directory (and, by default, its missing parents). New entries
    /// inside take `protection`, else the parent's class. Works in every lock state.
    public func createDirectory(
        atPath path: String, withIntermediateDirectories: Bool = true, protection protectionChoice: ProtectionChoice = .inherited
    ) throws(DataProtectionError) {
        let protection = protectionChoice.protectionClass
        let storePath = try StorePath(path)
        try storePath.requireCreatable(rootByteCount: root.string.utf8.count)
        try namespace.locked { () throws(DataProtectionError) in
            // Like mkdir(2) and FileManager: a file already at the path is `fileExists`.
            if (try? locate(storePath))?.kind == .file {
                throw DataProtectionError(.fileExists, "\(storePath) already exists and is a file.")
            }
            if !withIntermediateDirectories {
                guard try locate(storePath.parent).kind == .directory else {
                    throw DataProtectionError(.fileNotFound, "No such directory: \(storePath.parent).")
                }
                if try locate(storePath).kind != .missing {
                    throw DataProtectionError(.fileExists, "\(storePath) already exists.")
                }
            }
            // `makeDirectories` creates every missing ancestor and throws `notADirectory` on a file.
            _ = try makeDirectories(storePath, protection: protection)
        }
    }

    /// The names directly inside the directory at `path` (works in every lock state).
    public func contentsOfDirectory(atPath path: String) throws(DataProtectionError) -> [String] {
        let storePath = try StorePath(path)
        return try namespace.locked { () throws(DataProtectionError) -> [String] in
            let location = try locate(storePath)
            switch location.kind {
            case .missing: throw DataProtectionError(.fileNotFound, "No such directory: \(storePath).")
            case .file: throw DataProtectionError(.notADirectory, "Not a directory: \(storePath).")
            case .directory: break
            }
            let metadata = try directoryMetadata(at: location.disk, place: location.place)
            var names: [String] = []
            for entry in try fileSystem.contentsOfDirectory(at: location.disk) where Self.isEntryName(entry) {
                guard let name = try NameCipher.decrypt(entry, directoryID: metadata.id, device: device) else {
                    throw DataProtectionError.integrity("\(storePath) holds an entry whose name does not decrypt: the store was tampered with.")
                }
                names.append(name)
            }
            if storePath.isRoot, !ReservedStoreArea.isOpen {
                names.removeAll { $0 == ReservedStoreArea.itemsDirectory }
            }
            return names.sorted()
        }
    }

    /// How far the tree of the directory at `disk` reaches below it: its deepest level of
    /// entries, and its longest on-disk path below it (names and their `/`).
    private func treeExtent(at disk: FilePath) throws(DataProtectionError) -> (depth: Int, length: Int) {
        var extent = (depth: 0, length: 0)
        for entry in try fileSystem.contentsOfDirectory(at: disk) where Self.isEntryName(entry) {
            var below = (depth: 0, length: 0)
            if try kind(of: disk.appending(entry)) == .directory { below = try treeExtent(at: disk.appending(entry)) }
            extent.depth = max(extent.depth, 1 + below.depth)
            extent.length = max(extent.length, 1 + entry.utf8.count + below.length)
        }
        return extent
    }

    /// Whether an on-disk name is an entry (not metadata, a journal or debris).
    static func isEntryName(_ name: String) -> Bool {
        name != DirectoryMetadata.fileName && !name.hasPrefix(".") && !name.hasSuffix(FileJournal.suffix)
    }

    /// Creates every missing directory of `path` (the last one with `protection`,
    /// the others inheriting), and returns the metadata of `path`.
    ///
    /// A directory made without a class records the class its parent gives new entries at
    /// that moment (`completeUntilFirstUserAuthentication` for a parent that records none: the
    /// root until its class is set), so that a later class of an ancestor changes nothing
    /// below it and `stat` shows the class its new files take (`semantics.md`, "Protection
    /// classes").
    @discardableResult
    func makeDirectories(_ path: StorePath, protection: ProtectionClass?) throws(DataProtectionError) -> DirectoryMetadata {
        var disk = root
        var metadata = try directoryMetadata(at: root, place: .root)
        for (position, name) in path.components.enumerated() {
            let entry = disk.appending(try NameCipher.encrypt(name, directoryID: metadata.id, device: device))
            let place = Place(directoryID: metadata.id, name: name)
            switch try kind(of: entry) {
            case .file:
                throw DataProtectionError(.notADirectory, "Not a directory: \(StorePath(components: Array(path.components.prefix(position + 1)))).")
            case .directory:
                break
            case .missing:
                let isLast = position == path.components.count - 1
                let inherited = metadata.protectionClass ?? .default
                let created = try DirectoryMetadata(id: Random.bytes(count: 16), protectionClass: (isLast ? protection : nil) ?? inherited,
                                                    place: place, device: device)
                try createDirectoryEntry(created, at: entry, in: disk)
            }
            disk = entry
            metadata = try directoryMetadata(at: disk, place: place)
        }
        return metadata
    }

    /// Creates a directory atomically: built under a temporary name with its
    /// metadata inside, then renamed into place.
    private func createDirectoryEntry(_ metadata: DirectoryMetadata, at entry: FilePath, in parent: FilePath) throws(DataProtectionError) {
        let temporary = parent.appending(AtomicFileWriter.temporaryPrefix + "dir-" + Base64URL.encode(Random.bytes(count: 9)))
        try fileSystem.createDirectory(at: temporary)
        do throws(DataProtectionError) {
            try AtomicFileWriter(fileSystem: fileSystem).write([.data(metadata.encoded(device: device))],
                                                               to: temporary.appending(DirectoryMetadata.fileName))
            try fileSystem.rename(temporary, to: entry)
        } catch {
            try? fileSystem.removeTree(at: temporary)
            throw error
        }
        try fileSystem.synchronizeDirectory(at: parent)
        state.withLock { $0.directories[entry] = metadata }
    }
}
