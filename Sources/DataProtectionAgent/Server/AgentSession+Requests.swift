import DataProtection
import DataProtectionSQLite
import Foundation
import SocketBridge
import SodiumBridge
import SystemPackage

extension AgentSession {
    /// Carries out one request on the agent's store and device.
    func perform(_ request: AgentRequest, descriptor: FileDescriptor?) throws(DataProtectionError) -> AgentResponse {
        switch request {
        case .hello:
            throw DataProtectionError(.invalidArgument, "hello is the first request only.")
        case .watch:
            throw DataProtectionError(.invalidArgument, "watch takes the whole connection.")
        case .stop, .lock:
            if case .lock = request { try device.lock() }
            return .ok([])
        case .status:
            return .ok(status().encoded())
        case .unlock(let passcode):
            try device.unlock(passcode: passcode)
            return .ok([])
        case .setPasscode(let passcode):
            try device.setPasscode(passcode)
            return .ok([])
        case .changePasscode(let old, let new):
            try device.changePasscode(from: old, to: new)
            return .ok([])
        case .removePasscode(let passcode):
            try device.removePasscode(passcode)
            return .ok([])
        case .erase:
            try device.erase()
            return .ok([])
        case .itemAdd, .itemSearch, .itemByID, .itemSecret, .itemUpdate, .itemUpdateMatching, .itemDelete, .itemDeleteMatching,
             .itemGeneration, .itemUpdateAccessibility:
            return try performItemRequest(request)
        case .backupCreate(let recipients, let passphrase, let workFactor, let items):
            return try performBackup(recipients: recipients, passphrase: passphrase, workFactor: workFactor, items: items, descriptor: descriptor)
        case .sql(let path, let create, let protection, let statements):
            return .ok(try runSQL(statements, inDatabaseAtPath: path, create: create, protection: protection))
        case .sqlStream(let path, let create, let protection, let keepGoing):
            guard let descriptor else {
                throw DataProtectionError(.invalidArgument, "sqlStream needs a socket passed with the request.")
            }
            try runSQLStream(inDatabaseAtPath: path, create: create, protection: protection, keepGoing: keepGoing, descriptor: descriptor)
            return .ok([])
        case .readFile(let path):
            guard let descriptor else {
                let attributes = try store.attributesOfItem(atPath: path)
                if attributes.type == .file, attributes.size > UInt64(AgentWireFormat.maximumInlineData) {
                    return .descriptorNeeded(size: attributes.size)
                }
                contentWatch = AgentDiscardWatch(device: device, protection: attributes.protectionClass)
                let data = try store.contents(atPath: path)
                guard data.count <= AgentWireFormat.maximumInlineData else { return .descriptorNeeded(size: UInt64(data.count)) }
                return .ok(AgentReply.data(data))
            }
            defer { try? descriptor.close() }
            return .ok(AgentReply.u64(try copy(path, to: descriptor)))
        case .writeFile(let path, let protection, let exclusive, let source):
            if let data = source.inlineData {
                try store.write(data, to: path, protection: ProtectionChoice(protection), options: exclusive ? .withoutOverwriting : [])
                return .ok([])
            }
            guard let descriptor else {
                throw DataProtectionError(.invalidArgument, "writeFile from a descriptor needs one passed with the request.")
            }
            defer { try? descriptor.close() }
            let watch = AgentDiscardWatch(device: device, protection: classOfWrite(to: path, protection: protection))
            try write(path, protection: protection, exclusive: exclusive,
                      from: AgentInput(descriptor, pieces: source == .pieces, connection: channel.socket, watch: watch))
            return .ok([])
        case .attributes(let path):
            return .ok(try store.attributesOfItem(atPath: path).encoded())
        case .list(let path):
            return .ok(AgentReply.names(try store.contentsOfDirectory(atPath: path)))
        case .createDirectory(let path, let intermediates, let protection):
            try store.createDirectory(atPath: path, withIntermediateDirectories: intermediates, protection: ProtectionChoice(protection))
            return .ok([])
        case .remove(let path):
            try store.removeItem(atPath: path)
            return .ok([])
        case .move(let source, let destination):
            try store.moveItem(atPath: source, toPath: destination)
            return .ok([])
        case .copy(let source, let destination, let protection):
            try store.copyItem(atPath: source, toPath: destination, protection: ProtectionChoice(protection))
            return .ok([])
        case .setProtection(let path, let protection):
            try store.setProtectionClass(protection, ofItemAtPath: path)
            return .ok([])
        case .open(let path, let mode, let create, let protection):
            guard handles.count < AgentWireFormat.maximumHandlesPerClient else {
                throw DataProtectionError(.invalidArgument, "This connection already holds \(handles.count) open handles, the most one client may hold.",
                                          hint: "Close handles you no longer use.")
            }
            let handle = try store.openFile(atPath: path, mode: mode, create: create, protection: ProtectionChoice(protection))
            let identifier = nextHandle
            nextHandle &+= 1
            handles[identifier] = handle
            return .ok(AgentReply.u32(identifier))
        case .read(let identifier, let offset, let count):
            let handle = try self.handle(identifier)
            contentWatch = AgentDiscardWatch(device: device, protection: handle.protectionClass)
            let count = min(Int(count), AgentWireFormat.maximumInlineData)
            let data = if let offset { try handle.read(atOffset: offset, upToCount: count) } else { try handle.read(upToCount: count) }
            return .ok(AgentReply.data(data))
        case .write(let identifier, let offset, let data):
            let handle = try self.handle(identifier)
            if let offset { try handle.write(contentsOf: data, atOffset: offset) } else { try handle.write(contentsOf: data) }
            return .ok([])
        case .seek(let identifier, let offset):
            try handle(identifier).seek(toOffset: offset)
            return .ok([])
        case .seekToEnd(let identifier):
            return .ok(AgentReply.u64(try handle(identifier).seekToEnd()))
        case .offset(let identifier):
            return .ok(AgentReply.u64(try handle(identifier).offset()))
        case .size(let identifier):
            return .ok(AgentReply.u64(try handle(identifier).size()))
        case .truncate(let identifier, let offset):
            try handle(identifier).truncate(atOffset: offset)
            return .ok([])
        case .synchronize(let identifier):
            try handle(identifier).synchronize()
            return .ok([])
        case .close(let identifier):
            let handle = try self.handle(identifier)
            handles.removeValue(forKey: identifier)
            try handle.close()
            return .ok([])
        }
    }

    /// Runs `statements` on the database at `path` in the agent's store; their rows must fit in one answer.
    private func runSQL(_ statements: String, inDatabaseAtPath path: String, create: Bool, protection: ProtectionClass?)
        throws(DataProtectionError) -> [UInt8] {
        let database = try ProtectedDatabase(atPath: path, in: store, create: create, protection: ProtectionChoice(protection))
        defer { database.close() }
        contentWatch = AgentDiscardWatch(device: device, protection: database.protectionClass)
        var rows: [SQLiteRow] = []
        var size = 0
        try database.execute(statements) { row in
            size += row.values.count * 16 + row.listModeText.count * 2
            if size <= AgentWireFormat.maximumInlineData { rows.append(row) }
        }
        let body = AgentSQLRows.encode(rows)
        guard size <= AgentWireFormat.maximumInlineData, body.count < AgentWireFormat.maximumFrameLength else {
            throw DataProtectionError(.invalidArgument, "The statements ran, but their rows do not fit in one answer of the agent (1 MiB).",
                                      hint: "Narrow the query (LIMIT, fewer columns), or stop the agent and run it in one process.")
        }
        return body
    }

    private func handle(_ identifier: UInt32) throws(DataProtectionError) -> ProtectedFileHandle {
        guard let handle = handles[identifier] else {
            throw DataProtectionError(.handleClosed, "No open handle \(identifier) on this connection.")
        }
        return handle
    }

    /// The device as `status` reports it.
    func status() -> AgentStatus {
        let now = device.clock.now
        func remaining(_ instant: DeviceInstant?) -> Duration? {
            instant.map { now.duration(to: $0) }.map { max(.zero, $0) }
        }
        return AgentStatus(
            state: device.state, passcodeSet: device.hasPasscode, failedPasscodeAttempts: device.failedPasscodeAttempts,
            nextAttemptAllowedIn: remaining(device.nextPasscodeAttemptAllowed),
            autoLock: server.configuration.autoLock, autoLockIn: server.autoLockRemaining(),
            keyDiscardIn: remaining(device.nextKeyDiscard),
            availableClasses: ProtectionClass.allCases.filter { device.isAvailable($0) },
            agentProcessIdentifier: getpid(), sessionFollowing: server.sessionFollowing,
            deviceKeyKind: device.deviceKeyKind)
    }

    /// Streams the file at `path` into `descriptor` (the client's file, pipe or socket),
    /// writing each piece behind while the next one is read and decrypted.
    private func copy(_ path: String, to descriptor: FileDescriptor) throws(DataProtectionError) -> UInt64 {
        let handle = try store.fileHandle(forReadingAtPath: path)
        defer { try? handle.close() }
        // At the discard of the file's key, what is read and not yet written to the client goes.
        let watch = AgentDiscardWatch(device: device, protection: handle.protectionClass)
        let output = PipelinedOutput(descriptor, describe: "the client's output") { descriptor, bytes in
            try AgentDiscardWatch.write(bytes, to: descriptor, watch: watch)
        }
        // Nothing queued may outlive this call: the caller closes the descriptor next.
        defer { try? output.finish() }
        var total: UInt64 = 0
        do {
            while case let piece = try handle.read(upToCount: AgentWireFormat.maximumInlineData), !piece.isEmpty {
                try watch?.check()
                try output.write(piece)
                total += UInt64(piece.count)
            }
            try output.finish()
        } catch is OutputClosed {
            throw AgentWireFormat.outputClosed
        } catch let error as DataProtectionError {
            throw error
        } catch {
            throw DataProtectionError(.ioFailure, "Cannot write to the client's output: \(error).")
        }
        return total
    }

    /// The class a whole-file write to `path` gives the file: the one asked for, else the
    /// replaced file's, else its directory's (`nil`: not known here, the default's).
    private func classOfWrite(to path: String, protection: ProtectionClass?) -> ProtectionClass? {
        if let protection { return protection }
        if let existing = try? store.attributesOfItem(atPath: path), existing.type == .file { return existing.protectionClass }
        let parent = (path as NSString).deletingLastPathComponent
        return (try? store.attributesOfItem(atPath: parent.isEmpty ? "/" : parent))?.protectionClass
    }

    /// Stores what `input` holds up to its end at `path` (atomically, like `write`).
    private func write(_ path: String, protection: ProtectionClass?, exclusive: Bool, from input: AgentInput) throws(DataProtectionError) {
        var input = input
        try store.write(to: path, protection: ProtectionChoice(protection), exclusive: exclusive) { () throws(DataProtectionError) -> Data? in
            try input.next()
        }
    }
}

/// A client's content arriving through a descriptor: raw to its end, or in pieces up to
/// an empty one (``AgentWriteSource``).
struct AgentInput {
    let descriptor: FileDescriptor
    /// The client's connection: a raw descriptor's end counts only while the client is still
    /// there to be answered (a client killed mid-transfer stores nothing).
    let connection: UnixSocket
    private var pieces: AgentPieceReader?
    private var buffer: [UInt8] = []
    /// Stops the transfer at the discard of the file's class key.
    let watch: AgentDiscardWatch?

    init(_ descriptor: FileDescriptor, pieces: Bool, connection: UnixSocket, watch: AgentDiscardWatch? = nil) {
        self.descriptor = descriptor
        self.connection = connection
        self.watch = watch
        if pieces {
            self.pieces = AgentPieceReader(descriptor, limit: AgentWireFormat.maximumInlineData, describe: "the client's content", watch: watch)
        } else {
            buffer = [UInt8](repeating: 0, count: AgentWireFormat.maximumInlineData)
        }
    }

    /// The next piece; `nil` at the end. The buffer it was read into is wiped once it is
    /// copied out (the copy goes to the store, which releases it, wiped, once written).
    mutating func next() throws(DataProtectionError) -> Data? {
        if pieces != nil {
            defer { pieces?.wipe() }
            let piece = try pieces?.next(cut: DataProtectionError(
                .ioFailure, "The client's content ended before its end marker: nothing was stored.")).map { Data($0) }
            try watch?.check()
            return piece
        }
        defer { Sodium.wipe(&buffer) }
        try AgentDiscardWatch.waitUntilReadable(descriptor, watch: watch)
        let count: Int
        do {
            count = try buffer.withUnsafeMutableBytes { bytes in try descriptor.read(into: bytes, retryOnInterrupt: true) }
        } catch {
            throw DataProtectionError(.ioFailure, "Cannot read the client's content: \(error).")
        }
        if count == 0 && (try? connection.waitUntilReadable(milliseconds: 0)) != false {
            // A waiting client sends nothing until answered: readable means it hung up.
            throw DataProtectionError(.ioFailure, "The client went away before its content was stored: nothing was stored.")
        }
        return count == 0 ? nil : Data(buffer[0..<count])
    }
}
