import Foundation
import SodiumBridge
import SystemPackage
@testable import DataProtection

/// A ``FileSystem`` that fails chosen calls: it forwards to ``PosixFileSystem``,
/// numbers the calls of each ``Call`` kind, and, once armed, makes the k-th call
/// of one kind fail with a chosen `errno` (as the real one maps it) without
/// performing it, or, for a `write`, after writing half of the bytes (a short
/// write, as on a full disk). ``Fault/Duration-swift.enum/persistent`` keeps
/// failing every later call of that kind too, until ``disarm()``.
final class FaultInjectingFileSystem: FileSystem {
    /// The kinds of system call, as the fault tests name them.
    enum Call: String, CaseIterable, Sendable, CustomStringConvertible {
        /// `open`/`creat` of a file (whole-file reads included).
        case open
        /// `pread` of a data file.
        case read
        /// `write`/`pwrite`.
        case write
        /// `fsync` of a file or a directory.
        case fsync
        case close
        case rename
        /// `unlink` and recursive removal.
        case unlink
        case mkdir
        case ftruncate
        /// `stat`/`lstat`/`fstat`.
        case stat
        /// `readdir`.
        case list

        var description: String { rawValue }
    }

    struct Fault: Sendable, CustomStringConvertible {
        enum Duration: Sendable { case once, persistent }
        var call: Call
        /// 1-based: the `occurrence`-th call of `call` after arming fails.
        var occurrence: Int
        var errno: Errno
        var duration: Duration = .once

        var description: String { "\(call) #\(occurrence) \(errno)\(duration == .persistent ? " (persistent)" : "")" }
    }

    private struct State {
        var counts: [Call: Int] = [:]
        var fault: Fault?
        var injected = 0
        var created: [(path: FilePath, mode: Int, isDirectory: Bool)] = []
        var open: Set<Int32> = []
        var doubleCloses: [String] = []
    }

    private let base = PosixFileSystem()
    private let state = Locked(State())

    /// Descriptors closed that were not open through this file system at the time: a second
    /// `close` of one descriptor (which closes whatever another thread opened under its number).
    var doubleCloses: [String] { state.withLock { $0.doubleCloses } }

    private func opened(_ descriptor: FileDescriptor) -> FileDescriptor {
        state.withLock { _ = $0.open.insert(descriptor.rawValue) }
        return descriptor
    }

    /// Calls of each kind since creation or the last ``arm(_:)``/``resetCounts()``.
    var counts: [Call: Int] { state.withLock { $0.counts } }

    /// How many calls were failed since creation.
    var injected: Int { state.withLock { $0.injected } }

    /// Every file and directory created through this file system, with its permission bits
    /// just after creation (temporary files included).
    var created: [(path: FilePath, mode: Int, isDirectory: Bool)] { state.withLock { $0.created } }

    private func recordCreation(_ path: FilePath) {
        guard let stat = try? path.stat(followTargetSymlink: false) else { return }
        state.withLock { $0.created.append((path, Int(stat.permissions.rawValue & 0o7777), stat.type == .directory)) }
    }

    /// Resets the counts and sets the fault (`nil`: only count).
    func arm(_ fault: Fault?) {
        state.withLock { state in
            state.counts = [:]
            state.fault = fault
        }
    }

    func resetCounts() { arm(nil) }

    /// Clears the fault: every call succeeds again.
    func disarm() { state.withLock { $0.fault = nil } }

    /// Counts one call; the fault's errno if this one fails.
    private func count(_ call: Call) -> Errno? {
        state.withLock { state -> Errno? in
            state.counts[call, default: 0] += 1
            guard let fault = state.fault, fault.call == call else { return nil }
            let number = state.counts[call]!
            let fails = fault.duration == .once ? number == fault.occurrence : number >= fault.occurrence
            guard fails else { return nil }
            state.injected += 1
            return fault.errno
        }
    }

    private func check(_ call: Call, _ path: FilePath) throws(DataProtectionError) {
        if let errno = count(call) {
            throw PosixFileSystem.error(for: errno, operation: "\(call) (injected)", path: path)
        }
    }

    // MARK: - FileSystem

    func readFile(at path: FilePath, limit: Int) throws(DataProtectionError) -> Data? {
        try check(.open, path)
        return try base.readFile(at: path, limit: limit)
    }

    func readSecretFile(at path: FilePath) throws(DataProtectionError) -> SecureBytes? {
        try check(.open, path)
        return try base.readSecretFile(at: path)
    }

    func createFile(at path: FilePath) throws(DataProtectionError) -> FileDescriptor {
        try check(.open, path)
        let descriptor = try base.createFile(at: path)
        recordCreation(path)
        return opened(descriptor)
    }

    func write(_ bytes: FileBytes, to descriptor: FileDescriptor, path: FilePath) throws(DataProtectionError) {
        if let errno = count(.write) {
            // A short write: half of a public part reaches the file.
            if case .data(let data) = bytes, data.count > 1 {
                try base.write(.data(data.prefix(data.count / 2)), to: descriptor, path: path)
            }
            throw PosixFileSystem.error(for: errno, operation: "write (injected)", path: path)
        }
        try base.write(bytes, to: descriptor, path: path)
    }

    func synchronize(_ descriptor: FileDescriptor, path: FilePath) throws(DataProtectionError) {
        try check(.fsync, path)
        // The real `fsync` only slows the tests down: this process never loses power.
    }

    func close(_ descriptor: FileDescriptor, path: FilePath) throws(DataProtectionError) {
        state.withLock { state in
            if state.open.remove(descriptor.rawValue) == nil { state.doubleCloses.append("\(descriptor.rawValue) \(path)") }
        }
        if let errno = count(.close) {
            // close(2) releases the descriptor even when it reports an error.
            try? base.close(descriptor, path: path)
            throw PosixFileSystem.error(for: errno, operation: "close (injected)", path: path)
        }
        try base.close(descriptor, path: path)
    }

    func rename(_ source: FilePath, to destination: FilePath) throws(DataProtectionError) {
        try check(.rename, destination)
        try base.rename(source, to: destination)
    }

    func synchronizeDirectory(at path: FilePath) throws(DataProtectionError) {
        try check(.fsync, path)
    }

    func removeFile(at path: FilePath) throws(DataProtectionError) {
        try check(.unlink, path)
        try base.removeFile(at: path)
    }

    func createDirectory(at path: FilePath) throws(DataProtectionError) {
        try check(.mkdir, path)
        let existed = (try? base.status(at: path)) != nil
        try base.createDirectory(at: path)
        if !existed { recordCreation(path) }
    }

    func contentsOfDirectory(at path: FilePath) throws(DataProtectionError) -> [String] {
        try check(.list, path)
        return try base.contentsOfDirectory(at: path)
    }

    func openDataFile(at path: FilePath, create: Bool) throws(DataProtectionError) -> FileDescriptor {
        try check(.open, path)
        let descriptor = try base.openDataFile(at: path, create: create)
        if create { recordCreation(path) }
        return opened(descriptor)
    }

    func read(from descriptor: FileDescriptor, at offset: Int64, count: Int, path: FilePath) throws(DataProtectionError) -> Data {
        try check(.read, path)
        return try base.read(from: descriptor, at: offset, count: count, path: path)
    }

    func write(_ data: Data, range: Range<Int>, to descriptor: FileDescriptor, at offset: Int64, path: FilePath) throws(DataProtectionError) {
        if let errno = count(.write) {
            if range.count > 1 {
                let half = range.lowerBound..<range.lowerBound + range.count / 2
                try base.write(data, range: half, to: descriptor, at: offset, path: path)
            }
            throw PosixFileSystem.error(for: errno, operation: "pwrite (injected)", path: path)
        }
        try base.write(data, range: range, to: descriptor, at: offset, path: path)
    }

    func write(_ parts: [FileBytes], to descriptor: FileDescriptor, at offset: Int64, path: FilePath) throws(DataProtectionError) {
        if let errno = count(.write) {
            // A short write: the first part only.
            if parts.count > 1 { try base.write(Array(parts.prefix(1)), to: descriptor, at: offset, path: path) }
            throw PosixFileSystem.error(for: errno, operation: "pwrite (injected)", path: path)
        }
        try base.write(parts, to: descriptor, at: offset, path: path)
    }

    func resize(_ descriptor: FileDescriptor, to size: Int64, path: FilePath) throws(DataProtectionError) {
        try check(.ftruncate, path)
        try base.resize(descriptor, to: size, path: path)
    }

    func status(of descriptor: FileDescriptor, path: FilePath) throws(DataProtectionError) -> FileStatus {
        try check(.stat, path)
        return try base.status(of: descriptor, path: path)
    }

    func status(at path: FilePath) throws(DataProtectionError) -> FileStatus? {
        try check(.stat, path)
        return try base.status(at: path)
    }

    func removeTree(at path: FilePath) throws(DataProtectionError) {
        try check(.unlink, path)
        try base.removeTree(at: path)
    }
}
