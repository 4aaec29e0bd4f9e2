import Foundation
import Logging
import SodiumBridge
import SystemPackage

/// An encrypted store of protected files on a ``Device``: the Data Protection
/// counterpart of `FileManager`, `Data(contentsOf:)`/`write(to:)` and `FileHandle`.
///
/// Every file is encrypted at rest under its own key, wrapped by the key of its
/// ``ProtectionClass``; names are encrypted too, so a listing of the store on
/// disk reveals nothing. Each operation checks the class key at the instant it
/// runs, following `semantics.md`: a `complete` file cannot be read once the
/// device has locked, not even through a handle opened earlier.
///
/// Paths are store-relative and `/`-separated (`Documents/notes.txt`); a leading
/// `/` also means the root. The store is thread-safe.
public final class ProtectedStore: Sendable {
    /// log2 of the chunk size of new files: 16 KiB (see `Keys/file-format.md`, "Chunk size").
    package static let defaultChunkShift: UInt8 = 14
    /// log2 of the chunk size of a database created through the SQLite VFS: 4 KiB, SQLite's
    /// default page size, so that a page read decrypts one chunk and a page write seals one.
    package static let databaseChunkShift: UInt8 = 12

    /// The device whose keys protect the store.
    public let device: Device
    /// The store's directory on disk.
    public let directory: URL

    let root: FilePath
    /// Serialises changes to the name space (and the directory cache); remembers lookups between changes.
    let namespace = NamespaceLock()
    let state = Locked(StoreState())
    /// Signalled when a file leaves ``StoreState/settling`` (its opening or closing is done).
    let settled = NSCondition()
    let observer: StoreLifecycleObserver

    struct StoreState: Sendable {
        /// Open files by on-disk identity, shared by their handles.
        var openFiles: [FileIdentity: OpenFileEntry] = [:]
        /// Directory metadata by on-disk path.
        var directories: [FilePath: DirectoryMetadata] = [:]
        /// Files being opened (their journal recovered) or closed (their last flush) outside
        /// the lock: nobody else opens them meanwhile, or a recovery could replay or discard
        /// the journal of a flush still in progress.
        var settling: Set<FileIdentity> = []
    }

    struct OpenFileEntry: Sendable {
        let file: OpenFile
        var users: Int
    }

    /// A store in `directory`, protected by `device`. The directory is created if needed.
    /// The store's files go through the device's file system (the one the device was opened with).
    public init(directory: URL, device: Device) throws(DataProtectionError) {
        self.device = device
        self.directory = directory
        self.root = FilePath(directory.path)
        self.observer = StoreLifecycleObserver()
        observer.store = self
        device.addLifecycleObserver(observer)
        if device.hasDataToErase {
            // The device was erased while this store was not open (or the erase was cut short):
            // its files from before are unreadable debris, removed before anything else. The
            // `erasing` mark is not authenticated: the files are from before the erase only when
            // the root's metadata does not authenticate with the new keys (a planted mark beside
            // the current data removes nothing).
            if !StoreIdentity.rootAuthenticates(root: root, device: device) {
                try fileSystem.removeTree(at: root)
            } else {
                device.logger.warning("an erase mark stood beside data of the current keys; nothing removed")
            }
            try fileSystem.createDirectory(at: root)
            try openRoot()
            try device.dataErased()
        } else {
            try fileSystem.createDirectory(at: root)
            try openRoot()
        }
    }

    /// A store whose device directory is kept apart from the data (`Keys/key-hierarchy.md` §10):
    /// the data directory `directory` holds only encrypted files, names and metadata, and its
    /// identity (``identifier(ofDataDirectory:)``); `deviceDirectory` holds the device key,
    /// the effaceable key, the keybag and the attempt counter. A copy of the data alone can
    /// neither be opened nor attacked offline; a data directory opened with another device's
    /// directory, or with one made afresh, is `integrityFailure`.
    public convenience init(
        directory: URL,
        deviceDirectory: URL,
        clock: any DeviceClock = SystemClock.shared,
        configuration: DeviceConfiguration = DeviceConfiguration()
    ) throws(DataProtectionError) {
        try ParentDirectories.create(above: FilePath(directory.path))
        try ParentDirectories.create(above: FilePath(deviceDirectory.path))
        let device = try Device(directory: FilePath(deviceDirectory.path), clock: clock,
                                configuration: configuration, fileSystem: PosixFileSystem())
        try self.init(directory: directory, device: device)
    }

    /// A new device with `passcode` set from the start in `deviceDirectory`, and its store in
    /// `directory`, kept apart (see ``init(directory:deviceDirectory:clock:configuration:)``).
    ///
    /// - Throws: ``DataProtectionError/Code/fileExists`` if a device is already there.
    public convenience init(
        creatingAt directory: URL,
        deviceDirectory: URL,
        passcode: Passcode,
        clock: any DeviceClock = SystemClock.shared,
        configuration: DeviceConfiguration = DeviceConfiguration()
    ) throws(DataProtectionError) {
        try ParentDirectories.create(above: FilePath(directory.path))
        try ParentDirectories.create(above: FilePath(deviceDirectory.path))
        let device = try Device(directory: FilePath(deviceDirectory.path), clock: clock, configuration: configuration,
                                fileSystem: PosixFileSystem(), creatingWithPasscode: passcode)
        try self.init(directory: directory, device: device)
    }

    /// A new device with the UTF-8 bytes of `passcode` set from the start, and its store apart.
    public convenience init(
        creatingAt directory: URL,
        deviceDirectory: URL,
        passcode: String,
        clock: any DeviceClock = SystemClock.shared,
        configuration: DeviceConfiguration = DeviceConfiguration()
    ) throws(DataProtectionError) {
        try self.init(creatingAt: directory, deviceDirectory: deviceDirectory, passcode: Passcode(passcode),
                      clock: clock, configuration: configuration)
    }

    /// A device and its store in one directory (`device/` and `files/` inside it).
    public convenience init(
        directory: URL,
        clock: any DeviceClock = SystemClock.shared,
        configuration: DeviceConfiguration = DeviceConfiguration()
    ) throws(DataProtectionError) {
        try ParentDirectories.create(above: FilePath(directory.path))
        try self.init(directory: directory, clock: clock, configuration: configuration, fileSystem: PosixFileSystem())
    }

    /// A device and its store in one directory, on an injected file system (fault and crash tests).
    package convenience init(
        directory: URL, clock: any DeviceClock, configuration: DeviceConfiguration, fileSystem: any FileSystem
    ) throws(DataProtectionError) {
        try fileSystem.createDirectory(at: FilePath(directory.path))
        let device = try Device(directory: FilePath(directory.appendingPathComponent("device").path), clock: clock,
                                configuration: configuration, fileSystem: fileSystem)
        try self.init(directory: directory.appendingPathComponent("files"), device: device)
    }

    /// A new device with `passcode` set from the start, and its store, in one directory
    /// (`device/` and `files/` inside it): no keybag that opens without the passcode is
    /// ever written. The device is ``DeviceState/booted``.
    ///
    /// - Throws: ``DataProtectionError/Code/fileExists`` if a device is already there.
    public convenience init(
        creatingAt directory: URL,
        passcode: Passcode,
        clock: any DeviceClock = SystemClock.shared,
        configuration: DeviceConfiguration = DeviceConfiguration()
    ) throws(DataProtectionError) {
        let fileSystem = PosixFileSystem()
        try ParentDirectories.create(above: FilePath(directory.path))
        try fileSystem.createDirectory(at: FilePath(directory.path))
        let device = try Device(directory: FilePath(directory.appendingPathComponent("device").path), clock: clock,
                                configuration: configuration, fileSystem: fileSystem, creatingWithPasscode: passcode)
        try self.init(directory: directory.appendingPathComponent("files"), device: device)
    }

    /// A new device with the UTF-8 bytes of `passcode` set from the start, and its store, in one directory.
    public convenience init(
        creatingAt directory: URL,
        passcode: String,
        clock: any DeviceClock = SystemClock.shared,
        configuration: DeviceConfiguration = DeviceConfiguration()
    ) throws(DataProtectionError) {
        try self.init(creatingAt: directory, passcode: Passcode(passcode), clock: clock, configuration: configuration)
    }

    /// The file system every file of the store goes through: the device's.
    var fileSystem: any FileSystem { device.fileSystem }

    // MARK: - Root and directories on disk

    /// Creates the root directory and its metadata if missing (new store, or after erase).
    func prepareRoot() throws(DataProtectionError) {
        try namespace.locked { () throws(DataProtectionError) in
            try fileSystem.createDirectory(at: root)
            let metadataPath = root.appending(DirectoryMetadata.fileName)
            if try fileSystem.readFile(at: metadataPath, limit: smallFileByteLimit) == nil {
                let metadata = try DirectoryMetadata(id: Random.bytes(count: 16), protectionClass: nil, place: .root, device: device)
                try AtomicFileWriter(fileSystem: fileSystem).write([.data(metadata.encoded(device: device))], to: metadataPath)
            }
            removeDebris(under: root)
        }
    }

    /// Removes what interrupted writes, creations and removals left anywhere in the
    /// store (names starting with `.tmp-`: files and directories). Only at open, when
    /// no writer of this store can be in flight.
    private func removeDebris(under directory: FilePath) {
        guard let names = try? fileSystem.contentsOfDirectory(at: directory) else { return }
        for name in names where name != DirectoryMetadata.fileName {
            let entry = directory.appending(name)
            if name.hasPrefix(AtomicFileWriter.temporaryPrefix) {
                try? fileSystem.removeTree(at: entry)
            } else if (try? kind(of: entry)) == .directory {
                removeDebris(under: entry)
            }
        }
    }

    /// The metadata of the on-disk directory `path`, which must be bound to `place` (a
    /// directory moved or swapped on disk behind the store's back is `integrityFailure`).
    func directoryMetadata(at path: FilePath, place: Place) throws(DataProtectionError) -> DirectoryMetadata {
        if let cached = state.withLock({ $0.directories[path] }) { return cached }
        guard let data = try fileSystem.readFile(at: path.appending(DirectoryMetadata.fileName), limit: smallFileByteLimit) else {
            throw .integrity("A store directory has lost its metadata: the store was tampered with.")
        }
        var metadata = try DirectoryMetadata.decode(data, device: device)
        guard try metadata.isBound(to: place, device: device) else {
            throw .integrity("A directory is not where the store put it (\(place.name.isEmpty ? "the root" : place.name) was moved or swapped on disk behind the store's back).",
                             hint: "Restore the store directory from a backup.")
        }
        if metadata.places.count == 2, metadata.places[0] != metadata.places[1] {
            // A move cut short by a crash left the directory bound to its other place too: bound
            // here alone from now on, so that it cannot be moved back there behind the store's back
            // (`Keys/file-format.md` §10.2). Callers hold `namespace`, as every move does.
            metadata = try metadata.placed(place, place, device: device)
            try AtomicFileWriter(fileSystem: fileSystem).write([.data(metadata.encoded(device: device))],
                                                               to: path.appending(DirectoryMetadata.fileName))
        }
        state.withLock { $0.directories[path] = metadata }
        return metadata
    }

    func forgetDirectories() {
        state.withLock { $0.directories.removeAll() }
    }

    // MARK: - Resolution

    /// What a store path names on disk.
    struct Location: Sendable {
        enum Kind: Sendable { case file, directory, missing }
        let path: StorePath
        /// The on-disk path of the entry (for the root: the root).
        let disk: FilePath
        /// The containing directory on disk and its metadata (the root's own for the root).
        let parentDisk: FilePath
        let parent: DirectoryMetadata
        let kind: Kind

        /// Where the entry belongs (its parent's id and its name): what its metadata must bind.
        var place: Place {
            guard let name = path.components.last else { return .root }
            return Place(directoryID: parent.id, name: name)
        }
    }

    /// Resolves `path`: every ancestor must exist and be a directory.
    func locate(_ path: StorePath) throws(DataProtectionError) -> Location {
        var disk = root
        var metadata = try directoryMetadata(at: root, place: .root)
        if path.isRoot {
            return Location(path: path, disk: root, parentDisk: root, parent: metadata, kind: .directory)
        }
        for (position, name) in path.components.enumerated() {
            let entry = disk.appending(try NameCipher.encrypt(name, directoryID: metadata.id, device: device))
            let kind = try kind(of: entry)
            if position == path.components.count - 1 {
                return Location(path: path, disk: entry, parentDisk: disk, parent: metadata, kind: kind)
            }
            switch kind {
            case .missing:
                throw DataProtectionError(.fileNotFound, "No such directory: \(StorePath(components: Array(path.components.prefix(position + 1)))).")
            case .file:
                throw DataProtectionError(.notADirectory, "Not a directory: \(StorePath(components: Array(path.components.prefix(position + 1)))).")
            case .directory:
                disk = entry
                metadata = try directoryMetadata(at: disk, place: Place(directoryID: metadata.id, name: name))
            }
        }
        preconditionFailure("unreachable")
    }

    /// The kind of an on-disk entry, without following links: a link inside the
    /// store can only be planted, and is refused.
    func kind(of path: FilePath) throws(DataProtectionError) -> Location.Kind {
        switch try fileSystem.status(at: path)?.kind {
        case nil: return .missing
        case .regular: return .file
        case .directory: return .directory
        case .other:
            throw DataProtectionError(.invalidPath, "The store contains an entry that is neither a file nor a directory (\(path.lastComponent?.string ?? "")).",
                                      hint: "Something outside DataProtection changed the store directory.")
        }
    }

    // MARK: - Open files

    /// The shared open file for the file at `location`, opened if needed (needs the class key
    /// unless the file is already open with its key, as class B files are). A file that is
    /// not bound to the location's place (moved on disk behind the store's back) is refused.
    func acquire(_ location: Location) throws(DataProtectionError) -> OpenFile {
        let file = try acquire(location.disk)
        do throws(DataProtectionError) {
            try file.verifyPlace(location.place)
        } catch {
            try? release(file)
            throw error
        }
        return file
    }

    private func acquire(_ disk: FilePath) throws(DataProtectionError) -> OpenFile {
        let identity = try identity(of: disk)
        enum Step { case shared(OpenFile), open, wait }
        while true {
            let step = state.withLock { state -> Step in
                if state.settling.contains(identity) { return .wait }
                guard var entry = state.openFiles[identity] else {
                    state.settling.insert(identity)
                    return .open
                }
                entry.users += 1
                state.openFiles[identity] = entry
                return .shared(entry.file)
            }
            switch step {
            case .wait:
                waitUntilSettled(identity)
            case .shared(let existing):
                // Opening checks the class key even when the file is already open (a class A
                // file cannot be opened while locked); class B keeps its file key while open.
                do throws(DataProtectionError) {
                    try existing.checkAvailable()
                } catch {
                    try? release(existing)
                    throw error
                }
                return existing
            case .open:
                defer { settle(identity) }
                return try register(try OpenFile.open(at: disk, device: device))
            }
        }
    }

    /// Waits until `identity` is no longer being opened or closed by another thread.
    private func waitUntilSettled(_ identity: FileIdentity) {
        settled.lock()
        defer { settled.unlock() }
        while state.withLock({ $0.settling.contains(identity) }) { settled.wait() }
    }

    /// Ends the opening or closing of `identity` and wakes the threads waiting for it.
    private func settle(_ identity: FileIdentity) {
        state.withLock { _ = $0.settling.remove(identity) }
        settled.lock()
        settled.broadcast()
        settled.unlock()
    }

    /// Registers a newly opened file (or shares the one another thread registered meanwhile).
    func register(_ file: OpenFile) throws(DataProtectionError) -> OpenFile {
        let shared = state.withLock { state -> OpenFile in
            if var entry = state.openFiles[file.identity] {
                // Another thread opened it meanwhile: share theirs.
                entry.users += 1
                state.openFiles[file.identity] = entry
                return entry.file
            }
            state.openFiles[file.identity] = OpenFileEntry(file: file, users: 1)
            return file
        }
        if shared !== file { try file.close(flushing: false) }
        return shared
    }

    /// Drops one use of `file`; the last one flushes and closes it (nobody opens the
    /// file again until that is done). With `flushing`, a use that is not the last
    /// flushes durably too: a handle that may have written is closing.
    func release(_ file: OpenFile, flushing: Bool = false) throws(DataProtectionError) {
        let last = state.withLock { state -> Bool in
            guard var entry = state.openFiles[file.identity], entry.file === file else { return false }
            entry.users -= 1
            if entry.users == 0 {
                state.openFiles.removeValue(forKey: file.identity)
                state.settling.insert(file.identity)
                return true
            }
            state.openFiles[file.identity] = entry
            return false
        }
        guard last else {
            // Closing a handle makes its writes durable, even while other handles keep the file open.
            if flushing { try file.flush(durable: true) }
            return
        }
        defer { settle(file.identity) }
        try file.close(flushing: true)
    }

    /// Files `file` (open, in use by the caller) under its new identity after it was replaced
    /// on disk by a new file (a re-encrypting class change).
    func reidentify(_ file: OpenFile, from old: FileIdentity) {
        state.withLock { state in
            guard let entry = state.openFiles[old], entry.file === file else { return }
            state.openFiles.removeValue(forKey: old)
            state.openFiles[file.identity] = entry
        }
    }

    /// Runs `body`, which renames, replaces or removes the file at `disk`, with no flush of it
    /// in progress (``OpenFile/changingPlaces(of:fileSystem:_:)``); an open file there is then
    /// found at the first of `candidates` that names it, or marked unlinked. A file being
    /// closed (its last flush runs outside the name-space lock) is waited for first.
    func changingPlace(
        of disk: FilePath, candidates: [FilePath], _ body: () throws(DataProtectionError) -> Void
    ) throws(DataProtectionError) {
        waitForClosingFiles()
        let open = openFile(for: disk).map { [(file: $0, candidates: candidates)] } ?? []
        try OpenFile.changingPlaces(of: open, fileSystem: fileSystem, body)
    }

    /// Waits until no file is being opened or closed outside the name-space lock (the caller
    /// holds it, so none can start meanwhile): a file closing runs its last flush, whose
    /// journal must stay beside it.
    func waitForClosingFiles() {
        settled.lock()
        defer { settled.unlock() }
        while state.withLock({ !$0.settling.isEmpty }) { settled.wait() }
    }

    func openFile(for disk: FilePath) -> OpenFile? {
        guard let identity = try? identity(of: disk) else { return nil }
        return state.withLock { $0.openFiles[identity]?.file }
    }

    func identity(of path: FilePath) throws(DataProtectionError) -> FileIdentity {
        guard let status = try fileSystem.status(at: path) else {
            throw DataProtectionError(.fileNotFound, "stat \(path): no such file")
        }
        return status.identity
    }

    // MARK: - Device lifecycle

    func classKeysWillBeDiscarded(_ classes: Set<ProtectionClass>) {
        let files = state.withLock { $0.openFiles.values.map(\.file) }.filter { classes.contains($0.protectionClass) }
        // Each file flushes durably (its own fsyncs, in the order its crash safety needs) and only
        // then wipes its keys; files flush on parallel threads, so that their fsyncs overlap instead
        // of queueing one after another (a lock with many dirty handles would otherwise take one
        // disk flush per file). Every flush is done when this returns, before any class key goes.
        // Files with nothing to flush just wipe their keys, here: no thread is worth starting for them.
        var pending: [OpenFile] = [], idle: [OpenFile] = []
        for file in files {
            if file.hasPendingWrites { pending.append(file) } else { idle.append(file) }
        }
        // The wiped buffers are freed afterwards, in the background: their bytes are already zero.
        let retired = Locked<[SecureBytes]>([])
        Self.concurrently(pending, width: Self.discardFlushWidth) { file in
            let buffers = file.classKeyWillBeDiscarded()
            retired.withLock { $0 += buffers }
        }
        var buffers = retired.withLock { $0 }
        for file in idle { buffers += file.classKeyWillBeDiscarded() }
        if !buffers.isEmpty {
            let wiped = buffers
            buffers.removeAll()
            DispatchQueue.global(qos: .utility).async { withExtendedLifetime(wiped) {} }
        }
    }

    /// Threads flushing files in parallel when class keys go (they mostly wait on the disk).
    static let discardFlushWidth = 32

    /// Calls `body` on every element from up to `width` threads (this one included); returns when all are done.
    static func concurrently<T: Sendable>(_ elements: [T], width: Int, _ body: @escaping @Sendable (T) -> Void) {
        guard elements.count > 1, width > 1 else {
            elements.forEach(body)
            return
        }
        let next = Locked(0)
        let work: @Sendable () -> Void = {
            while true {
                let index = next.withLock { index in
                    defer { index += 1 }
                    return index
                }
                guard index < elements.count else { return }
                body(elements[index])
            }
        }
        // Threads of their own: they block on the disk, and the dispatch pool may be busy or capped.
        let helpers = min(width, elements.count) - 1
        let done = DispatchSemaphore(value: 0)
        for _ in 0..<helpers {
            Thread.detachNewThread {
                work()
                done.signal()
            }
        }
        work()
        for _ in 0..<helpers { done.wait() }
    }

    func deviceWillRestart(flushing: Bool) {
        let files = state.withLock { state in
            defer { state.openFiles.removeAll() }
            state.settling.formUnion(state.openFiles.keys)
            return state.openFiles.values.map(\.file)
        }
        for file in files {
            defer { settle(file.identity) }
            do throws(DataProtectionError) {
                try file.close(flushing: flushing)
            } catch {
                device.logger.error("could not flush a protected file at restart", metadata: ["error": "\(error.code.rawValue)"])
            }
        }
        forgetDirectories()
    }

    func deviceWillErase() {
        deviceWillRestart(flushing: false)
        namespace.locked {
            try? fileSystem.removeTree(at: root)
        }
    }

    func deviceDidErase() {
        do throws(DataProtectionError) {
            try namespace.locked { () throws(DataProtectionError) in
                try fileSystem.createDirectory(at: root)
                try openRoot()
            }
        } catch {
            device.logger.error("could not prepare the store after an erase", metadata: ["error": "\(error.code.rawValue)"])
        }
    }
}

/// Forwards the device's lifecycle to the store (held weakly by the device).
final class StoreLifecycleObserver: DeviceLifecycleObserver, @unchecked Sendable {
    weak var store: ProtectedStore?

    func deviceWillDiscardKeys(of classes: Set<ProtectionClass>) { store?.classKeysWillBeDiscarded(classes) }
    func deviceWillRestart(flushing: Bool) { store?.deviceWillRestart(flushing: flushing) }
    func deviceWillErase() { store?.deviceWillErase() }
    func deviceDidErase() { store?.deviceDidErase() }
    func deviceWillRemovePasscode() {
        guard let store else { return }
        do throws(DataProtectionError) {
            try store.discardPasscodeBoundItems()
        } catch {
            store.device.logger.error("could not remove the passcode-bound items", metadata: ["error": "\(error.code.rawValue)"])
        }
    }
}
