import Foundation
import SodiumBridge
import SystemPackage
@testable import DataProtection

/// A ``FileSystem`` that crashes: it forwards to ``PosixFileSystem``, numbers
/// the mutating operations (`createFile`, `write`, `synchronize`, `close`,
/// `rename`, `synchronizeDirectory`, `removeFile`) and, once armed, throws a
/// simulated crash instead of performing operation number N. From then on
/// every operation fails: the process is dead.
///
/// In ``Mode/loseUnsynced(_:)`` the crash is a power cut: what the disk had
/// not been told to make durable is lost. File data written since the file's
/// last `fsync` is truncated or turned into garbage, and every creation,
/// rename and removal not yet followed by an `fsync` of its directory is
/// undone (a rename puts the old target content back and the source file too).
/// In ``Mode/keepEverything`` the crash only stops the process.
///
/// Protected data files (positioned writes, `ftruncate`) are modelled page by
/// page: their content at the last `fsync` is kept, and a power cut loses
/// every write since (``Loss/truncate``), or keeps or loses each written 4 KiB
/// page independently, the file's size old or new (``Loss/garbage``: torn writes,
/// a sector holds either its old bytes or its new ones).
final class CrashingFileSystem: FileSystem {
    enum Loss: String, Sendable, CaseIterable {
        /// Unsynced file data becomes an empty file.
        case truncate
        /// Unsynced file data becomes random bytes.
        case garbage
    }

    enum Mode: Sendable, Hashable, CustomStringConvertible {
        case keepEverything
        case loseUnsynced(Loss)

        static let allCases: [Mode] = [.keepEverything, .loseUnsynced(.truncate), .loseUnsynced(.garbage)]
        /// The modes the (slower) device-level crash tests run in: garbage is the
        /// harsher loss (truncation is covered at the storage level).
        static let deviceCases: [Mode] = [.keepEverything, .loseUnsynced(.garbage)]

        var description: String {
            switch self {
            case .keepEverything: "keep everything"
            case .loseUnsynced(let loss): "lose unsynced (\(loss.rawValue))"
            }
        }
    }

    /// A directory-level change not yet made durable by an `fsync` of its directory.
    private enum Change {
        case created(FilePath)
        /// `moved`: the renamed file's content; `replaced`: what `destination` held before.
        case renamed(source: FilePath, destination: FilePath, moved: Data, replaced: Data?)
        case removed(FilePath, content: Data?)
        /// A directory renamed (undone by renaming it back).
        case renamedDirectory(source: FilePath, destination: FilePath)

        var directory: FilePath {
            switch self {
            case .created(let path), .removed(let path, _): path.removingLastComponent()
            case .renamed(_, let destination, _, _), .renamedDirectory(_, let destination): destination.removingLastComponent()
            }
        }
    }

    private struct State {
        var mode: Mode
        var operations = 0
        var crashAt: Int?
        var crashed = false
        /// Open descriptors (raw value) and their paths.
        var open: [CInt: FilePath] = [:]
        /// Files (by current path) whose data was written after their last `fsync`.
        var unsynced: Set<FilePath> = []
        /// Directory changes not yet synchronised, oldest first.
        var journal: [Change] = []
        /// Data files written since their last `fsync`: their content at that `fsync`
        /// (or when first written), and the byte ranges written since.
        var dataDurable: [FilePath: Data] = [:]
        var dataWritten: [FilePath: [Range<Int>]] = [:]
        /// The mutating operations since the last ``arm(crashAt:)``, for messages.
        var log: [String] = []
    }

    private let base = PosixFileSystem()
    private let state: Locked<State>

    init(mode: Mode) {
        state = Locked(State(mode: mode))
    }

    /// Chains of at most 32 commits (the standard limit lets one grow to 4,096): a power-cut
    /// series can then run past a chain's checkpoint, and start a new chain over the old one,
    /// in a few dozen commits.
    static let chainLimit = JournalChainLimit(commits: 32, bytes: 1 << 20)

    var journalChainLimit: JournalChainLimit { Self.chainLimit }

    /// Mutating operations performed since creation or the last ``arm(crashAt:)``.
    var operations: Int { state.withLock { $0.operations } }

    /// The mutating operations since the last ``arm(crashAt:)`` (number, call, file name).
    var log: [String] { state.withLock { $0.log } }

    /// Whether the simulated crash happened.
    var hasCrashed: Bool { state.withLock { $0.crashed } }

    /// Resets the operation count; the `step`-th mutating operation from now crashes
    /// (`nil`: only count).
    func arm(crashAt step: Int?) {
        state.withLock { state in
            state.operations = 0
            state.log = []
            state.crashAt = step
        }
    }

    /// Whether `error` is the simulated crash.
    static func isCrash(_ error: (any Error)?) -> Bool {
        guard let error = error as? DataProtectionError else { return false }
        return error.message.hasPrefix(crashMessage)
    }

    private static let crashMessage = "simulated crash"

    // MARK: - FileSystem

    func readFile(at path: FilePath, limit: Int) throws(DataProtectionError) -> Data? {
        try checkAlive()
        return try base.readFile(at: path, limit: limit)
    }

    func readSecretFile(at path: FilePath) throws(DataProtectionError) -> SecureBytes? {
        try checkAlive()
        return try base.readSecretFile(at: path)
    }

    func createFile(at path: FilePath) throws(DataProtectionError) -> FileDescriptor {
        try step()
        let descriptor = try base.createFile(at: path)
        state.withLock { state in
            state.open[descriptor.rawValue] = path
            state.journal.append(.created(path))
        }
        return descriptor
    }

    func write(_ bytes: FileBytes, to descriptor: FileDescriptor, path: FilePath) throws(DataProtectionError) {
        try step()
        try base.write(bytes, to: descriptor, path: path)
        state.withLock { state in
            if let current = state.open[descriptor.rawValue] { state.unsynced.insert(current) }
        }
    }

    func synchronize(_ descriptor: FileDescriptor, path: FilePath) throws(DataProtectionError) {
        try step()
        // Durability is what this double models (`unsynced`, `journal`): the
        // real `fsync` would only slow the tests down, since this process never loses power.
        state.withLock { state in
            if let current = state.open[descriptor.rawValue] {
                state.unsynced.remove(current)
                state.dataDurable.removeValue(forKey: current)
                state.dataWritten.removeValue(forKey: current)
            }
        }
    }

    func close(_ descriptor: FileDescriptor, path: FilePath) throws(DataProtectionError) {
        try step()
        state.withLock { _ = $0.open.removeValue(forKey: descriptor.rawValue) }
        try base.close(descriptor, path: path)
    }

    func rename(_ source: FilePath, to destination: FilePath) throws(DataProtectionError) {
        try step()
        if try base.status(at: source)?.kind == .directory {
            try base.rename(source, to: destination)
            state.withLock { state in
                state.journal.append(.renamedDirectory(source: source, destination: destination))
                // Tracked paths inside move with it.
                let prefix = source.string + "/"
                for (raw, path) in state.open where path.string.hasPrefix(prefix) {
                    state.open[raw] = FilePath(destination.string + path.string.dropFirst(source.string.count))
                }
                for path in Array(state.dataDurable.keys) where path.string.hasPrefix(prefix) {
                    let moved = FilePath(destination.string + path.string.dropFirst(source.string.count))
                    state.dataDurable[moved] = state.dataDurable.removeValue(forKey: path)
                    state.dataWritten[moved] = state.dataWritten.removeValue(forKey: path)
                }
            }
            return
        }
        let moved = try base.readFile(at: source, limit: .max) ?? Data()
        let replaced = try base.readFile(at: destination, limit: .max)
        try base.rename(source, to: destination)
        state.withLock { state in
            var moved = moved
            // The replaced file's unsynced data goes with it; the moved file's stays unsynced.
            state.unsynced.remove(destination)
            if state.unsynced.remove(source) != nil {
                state.unsynced.insert(destination)
                moved = Self.lost(moved, state.mode)
            }
            state.journal.append(.renamed(source: source, destination: destination, moved: moved, replaced: replaced))
            state.dataDurable.removeValue(forKey: destination)
            state.dataWritten.removeValue(forKey: destination)
            if let durable = state.dataDurable.removeValue(forKey: source) {
                state.dataDurable[destination] = durable
                state.dataWritten[destination] = state.dataWritten.removeValue(forKey: source)
            }
            for (raw, path) in state.open where path == source { state.open[raw] = destination }
        }
    }

    func synchronizeDirectory(at path: FilePath) throws(DataProtectionError) {
        try step()
        state.withLock { state in
            state.journal.removeAll { $0.directory == path }
        }
    }

    /// A second name: undone by a power cut (before an `fsync` of its directory) as a creation is.
    /// (Only ``Mode/keepEverything`` models it exactly: a removal undone puts a copy back, not a link.)
    func link(_ source: FilePath, to destination: FilePath) throws(DataProtectionError) {
        try step()
        try base.link(source, to: destination)
        state.withLock { state in state.journal.append(.created(destination)) }
    }

    func removeFile(at path: FilePath) throws(DataProtectionError) {
        try step()
        let content = try base.readFile(at: path, limit: .max)
        try base.removeFile(at: path)
        state.withLock { state in
            state.unsynced.remove(path)
            if content != nil { state.journal.append(.removed(path, content: content)) }
        }
    }

    func createDirectory(at path: FilePath) throws(DataProtectionError) {
        try checkAlive()
        try base.createDirectory(at: path)
    }

    func contentsOfDirectory(at path: FilePath) throws(DataProtectionError) -> [String] {
        try checkAlive()
        return try base.contentsOfDirectory(at: path)
    }

    // MARK: - Protected data files and the store's tree
    // Counted and crashed like the others; a power cut does not yet lose unsynced
    // data-file writes (the store's files are crash-tested by the kill harness instead).

    func openDataFile(at path: FilePath, create: Bool) throws(DataProtectionError) -> FileDescriptor {
        if create { try step() } else { try checkAlive() }
        let descriptor = try base.openDataFile(at: path, create: create)
        state.withLock { state in
            state.open[descriptor.rawValue] = path
            if create { state.journal.append(.created(path)) }
        }
        return descriptor
    }

    func read(from descriptor: FileDescriptor, at offset: Int64, count: Int, path: FilePath) throws(DataProtectionError) -> Data {
        try checkAlive()
        return try base.read(from: descriptor, at: offset, count: count, path: path)
    }

    func write(_ data: Data, range: Range<Int>, to descriptor: FileDescriptor, at offset: Int64, path: FilePath) throws(DataProtectionError) {
        try step()
        let current = try trackDataWrite(descriptor)
        try base.write(data, range: range, to: descriptor, at: offset, path: path)
        state.withLock { $0.dataWritten[current, default: []].append(Int(offset)..<Int(offset) + range.count) }
    }

    func write(_ parts: [FileBytes], to descriptor: FileDescriptor, at offset: Int64, path: FilePath) throws(DataProtectionError) {
        try step()
        let current = try trackDataWrite(descriptor)
        try base.write(parts, to: descriptor, at: offset, path: path)
        let count = parts.reduce(0) { $0 + $1.count }
        state.withLock { $0.dataWritten[current, default: []].append(Int(offset)..<Int(offset) + count) }
    }

    func resize(_ descriptor: FileDescriptor, to size: Int64, path: FilePath) throws(DataProtectionError) {
        try step()
        let current = try trackDataWrite(descriptor)
        let old = try base.status(of: descriptor, path: path).size
        try base.resize(descriptor, to: size, path: path)
        state.withLock { $0.dataWritten[current, default: []].append(Int(min(old, size))..<Int(max(old, size))) }
    }

    /// The current path of a data file about to be written; its durable content is remembered first.
    private func trackDataWrite(_ descriptor: FileDescriptor) throws(DataProtectionError) -> FilePath {
        guard let current = state.withLock({ $0.open[descriptor.rawValue] }) else {
            throw DataProtectionError(.ioFailure, "write to a descriptor this file system did not open")
        }
        if state.withLock({ $0.dataDurable[current] }) == nil {
            let content = try base.readFile(at: current, limit: .max) ?? Data()
            state.withLock { $0.dataDurable[current] = content }
        }
        return current
    }

    func status(of descriptor: FileDescriptor, path: FilePath) throws(DataProtectionError) -> FileStatus {
        try checkAlive()
        return try base.status(of: descriptor, path: path)
    }

    func status(at path: FilePath) throws(DataProtectionError) -> FileStatus? {
        try checkAlive()
        return try base.status(at: path)
    }

    func removeTree(at path: FilePath) throws(DataProtectionError) {
        try step()
        try base.removeTree(at: path)
    }

    // MARK: - Crashing

    private func checkAlive() throws(DataProtectionError) {
        if state.withLock({ $0.crashed }) {
            throw DataProtectionError(.ioFailure, "\(Self.crashMessage): the process is dead")
        }
    }

    /// Counts one mutating operation, and crashes if it is the chosen one.
    private func step(_ what: String = #function, _ path: FilePath? = nil) throws(DataProtectionError) {
        let crashNow = state.withLock { state -> Bool in
            if state.crashed { return false }
            state.operations += 1
            state.log.append("\(state.operations) \(what.prefix { $0 != "(" }) \(path?.lastComponent?.string.prefix(12) ?? "")")
            return state.operations == state.crashAt
        }
        try checkAlive()
        guard crashNow else { return }
        let operation = state.withLock { state -> Int in
            state.crashed = true
            return state.operations
        }
        powerCut()
        throw DataProtectionError(.ioFailure, "\(Self.crashMessage) at mutating operation \(operation)")
    }

    /// Closes every open descriptor and, when losing unsynced data, undoes
    /// what was not durable.
    private func powerCut() {
        let (mode, open, unsynced, journal, dataDurable, dataWritten) = state.withLock { state in
            defer {
                state.open.removeAll()
                state.unsynced.removeAll()
                state.journal.removeAll()
                state.dataDurable.removeAll()
                state.dataWritten.removeAll()
            }
            return (state.mode, state.open, state.unsynced, state.journal, state.dataDurable, state.dataWritten)
        }
        for raw in open.keys { try? FileDescriptor(rawValue: raw).close() }
        guard case .loseUnsynced(let loss) = mode else { return }
        for (path, durable) in dataDurable {
            guard let current = try? base.readFile(at: path, limit: .max) else { continue }
            overwrite(path, with: Self.afterPowerCut(durable: durable, current: current, written: dataWritten[path] ?? [], loss))
        }
        for path in unsynced {
            if let data = try? base.readFile(at: path, limit: .max) {
                overwrite(path, with: Self.lost(data, mode))
            }
        }
        for change in journal.reversed() {
            switch change {
            case .created(let path):
                try? base.removeFile(at: path)
            case .renamed(let source, let destination, let moved, let replaced):
                overwrite(source, with: moved)
                if let replaced { overwrite(destination, with: replaced) } else { try? base.removeFile(at: destination) }
            case .removed(let path, let content):
                if let content { overwrite(path, with: content) }
            case .renamedDirectory(let source, let destination):
                try? base.rename(destination, to: source)
            }
        }
    }

    /// A data file after a power cut: with ``Loss/truncate`` its durable content; with
    /// ``Loss/garbage`` each written 4 KiB page old or new at random, the size old or new.
    private static func afterPowerCut(durable: Data, current: Data, written: [Range<Int>], _ loss: Loss) -> Data {
        guard loss == .garbage else { return durable }
        let page = 4_096
        let size = Bool.random() ? current.count : durable.count
        // The old bytes (zeros past the old end), then each written page new or old at random.
        var result = durable.prefix(size)
        if result.count < size { result.append(Data(count: size - result.count)) }
        var pages = Set<Int>()
        for range in written where !range.isEmpty {
            pages.formUnion(range.lowerBound / page...(range.upperBound - 1) / page)
        }
        for index in pages where Bool.random() {
            let start = index * page
            let end = min(start + page, size, current.count)
            guard start < end else { continue }
            result.replaceSubrange(start..<end, with: current.subdata(in: start..<end))
        }
        return Data(result)
    }

    /// What unsynced data turns into.
    private static func lost(_ data: Data, _ mode: Mode) -> Data {
        switch mode {
        case .keepEverything: data
        case .loseUnsynced(.truncate): Data()
        case .loseUnsynced(.garbage): Data((0..<max(data.count, 1)).map { _ in UInt8.random(in: 0...255) })
        }
    }

    /// Replaces a file's content behind the device's back (the disk after the power cut).
    private func overwrite(_ path: FilePath, with data: Data) {
        let url = URL(fileURLWithPath: path.string)
        try? FileManager.default.removeItem(at: url)
        _ = FileManager.default.createFile(atPath: path.string, contents: data, attributes: [.posixPermissions: 0o600])
    }
}
