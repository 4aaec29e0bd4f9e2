import Foundation

/// What a program does with protected files, wherever the store lives: in this process
/// (``ProtectedStore``) or in an agent (`AgentStore`, product `DataProtectionAgent`).
///
/// Write code against this protocol and it runs the same on both: every operation
/// follows the class rules of the device that owns the store.
public protocol ProtectedFileSystem: Sendable {
    /// A handle on an open file: ``ProtectedFileHandle`` in process, `AgentFileHandle` through
    /// an agent. (Named so as not to hide Foundation's `FileHandle` in conforming code.)
    associatedtype Handle: ProtectedFileHandling

    /// Writes `data` to the file at `path`, atomically (see ``ProtectedStore/write(_:to:protection:options:)-9mrrg``).
    func write(_ data: Data, to path: String, protection: ProtectionChoice, options: Data.WritingOptions) throws(DataProtectionError)
    /// Writes a file from the pieces `next` returns until `nil`, atomically, with constant memory.
    /// A source that throws stores nothing, and its error is thrown as it is (wrap a source's
    /// own errors, e.g. `ioFailure` for a failed read of standard input).
    func write(to path: String, protection: ProtectionChoice, exclusive: Bool, from next: () throws(DataProtectionError) -> Data?) throws(DataProtectionError)
    /// The whole content of the file at `path`.
    func contents(atPath path: String) throws(DataProtectionError) -> Data
    /// Type, size, class and dates of the item at `path`.
    func attributesOfItem(atPath path: String) throws(DataProtectionError) -> ProtectedItemAttributes
    /// Whether something exists at `path`.
    func fileExists(atPath path: String) -> Bool
    /// The names directly inside the directory at `path`.
    func contentsOfDirectory(atPath path: String) throws(DataProtectionError) -> [String]
    /// Creates a directory (and, with `withIntermediateDirectories`, its missing parents).
    func createDirectory(atPath path: String, withIntermediateDirectories: Bool, protection: ProtectionChoice) throws(DataProtectionError)
    /// Removes a file or an empty directory.
    func removeItem(atPath path: String) throws(DataProtectionError)
    /// Moves or renames a file or directory.
    func moveItem(atPath source: String, toPath destination: String) throws(DataProtectionError)
    /// Copies a file (re-encrypted under `protection`, else the source's class).
    func copyItem(atPath source: String, toPath destination: String, protection: ProtectionChoice) throws(DataProtectionError)
    /// Changes the class of a file (re-encrypting it) or a directory (for new entries).
    func setProtectionClass(_ protectionClass: ProtectionClass, ofItemAtPath path: String) throws(DataProtectionError)
    /// Opens a handle on the file at `path` (creating it with `create`).
    func openFile(atPath path: String, mode: ProtectedFileHandle.Mode, create: Bool, protection: ProtectionChoice) throws(DataProtectionError) -> Handle
}

extension ProtectedFileSystem {
    /// Writes `data` to `path` with the class its place gives it.
    public func write(_ data: Data, to path: String) throws(DataProtectionError) {
        try write(data, to: path, protection: .inherited, options: [])
    }

    /// Writes a file from pieces, with the class its place gives it, replacing any file there.
    public func write(
        to path: String, protection: ProtectionChoice = .inherited, from next: () throws(DataProtectionError) -> Data?
    ) throws(DataProtectionError) {
        try write(to: path, protection: protection, exclusive: false, from: next)
    }

    /// A handle for reading (Foundation's `FileHandle(forReadingAtPath:)`).
    public func fileHandle(forReadingAtPath path: String) throws(DataProtectionError) -> Handle {
        try openFile(atPath: path, mode: .read, create: false, protection: .inherited)
    }

    /// A handle for writing, at offset 0, without truncating.
    public func fileHandle(forWritingAtPath path: String) throws(DataProtectionError) -> Handle {
        try openFile(atPath: path, mode: .write, create: false, protection: .inherited)
    }

    /// A handle for reading and writing.
    public func fileHandle(forUpdatingAtPath path: String) throws(DataProtectionError) -> Handle {
        try openFile(atPath: path, mode: .update, create: false, protection: .inherited)
    }
}

/// A handle on a protected file, in this process (``ProtectedFileHandle``) or in an agent.
public protocol ProtectedFileHandling: Sendable {
    /// Reads up to `count` bytes at the offset and advances it; empty at the end of the file.
    func read(upToCount count: Int) throws(DataProtectionError) -> Data
    /// Reads from the offset to the end of the file.
    func readToEnd() throws(DataProtectionError) -> Data
    /// Reads up to `count` bytes at `offset` without moving the handle's offset.
    func read(atOffset offset: UInt64, upToCount count: Int) throws(DataProtectionError) -> Data
    /// Writes at the offset (in append mode: at the end) and advances it.
    func write<D: DataProtocol>(contentsOf data: D) throws(DataProtectionError)
    /// Writes at `offset` without moving the handle's offset.
    func write<D: DataProtocol>(contentsOf data: D, atOffset offset: UInt64) throws(DataProtectionError)
    /// Cuts or extends the file to `offset` bytes.
    func truncate(atOffset offset: UInt64) throws(DataProtectionError)
    /// Makes every write so far durable.
    func synchronize() throws(DataProtectionError)
    /// The handle's offset.
    func offset() throws(DataProtectionError) -> UInt64
    /// Moves the offset.
    func seek(toOffset offset: UInt64) throws(DataProtectionError)
    /// Moves the offset to the end and returns it.
    func seekToEnd() throws(DataProtectionError) -> UInt64
    /// The file's size.
    func size() throws(DataProtectionError) -> UInt64
    /// Flushes and closes the handle.
    func close() throws(DataProtectionError)
}

/// The lock state and passcode of a device, in this process (``Device``) or in an agent.
public protocol DeviceControlling: Sendable {
    /// The lock state.
    var state: DeviceState { get throws(DataProtectionError) }
    /// Whether a passcode is set.
    var hasPasscode: Bool { get throws(DataProtectionError) }
    /// The consecutive failed passcode attempts.
    var failedPasscodeAttempts: Int { get throws(DataProtectionError) }
    /// Whether an existing, closed file of `protectionClass` can be opened now.
    func isAvailable(_ protectionClass: ProtectionClass) throws(DataProtectionError) -> Bool
    /// Unlocks with `passcode` (`nil`: a bare unlock); a counted attempt.
    func unlock(passcode: Passcode?) throws(DataProtectionError)
    /// Locks the device.
    func lock() throws(DataProtectionError)
    /// Sets a passcode where there is none.
    func setPasscode(_ newPasscode: Passcode) throws(DataProtectionError)
    /// Changes the passcode.
    func changePasscode(from oldPasscode: Passcode, to newPasscode: Passcode) throws(DataProtectionError)
    /// Removes the passcode.
    func removePasscode(_ oldPasscode: Passcode) throws(DataProtectionError)
    /// Erases the device: every file becomes unrecoverable.
    func erase() throws(DataProtectionError)
    /// The notifications posted from now on.
    func notifications() -> AsyncStream<DeviceNotification>
}

extension DeviceControlling {
    /// Unlocks with the UTF-8 bytes of `passcode` (`nil`: a bare unlock); a counted attempt.
    public func unlock(passcode: String?) throws(DataProtectionError) {
        try unlock(passcode: passcode.map(Passcode.init(_:)))
    }

    /// Sets the UTF-8 bytes of `newPasscode` as the passcode where there is none.
    public func setPasscode(_ newPasscode: String) throws(DataProtectionError) {
        try setPasscode(Passcode(newPasscode))
    }

    /// Changes the passcode, both given as the UTF-8 bytes of a `String`.
    public func changePasscode(from oldPasscode: String, to newPasscode: String) throws(DataProtectionError) {
        try changePasscode(from: Passcode(oldPasscode), to: Passcode(newPasscode))
    }

    /// Removes the passcode, given as the UTF-8 bytes of a `String`.
    public func removePasscode(_ oldPasscode: String) throws(DataProtectionError) {
        try removePasscode(Passcode(oldPasscode))
    }
}

extension ProtectedStore: ProtectedFileSystem {}
extension ProtectedFileHandle: ProtectedFileHandling {}
extension Device: DeviceControlling {}
