import DataProtection
import DataProtectionSQLite
import Foundation
import SocketBridge
import SodiumBridge
import SystemPackage

extension AgentSession {
    /// Runs the statements a client streams through `descriptor` (`sqlStream`,
    /// `Keys/agent-protocol.md` §4) on the database at `path`, as `sqlite3` runs a script:
    /// each complete statement as soon as it has arrived, its rows sent back in pieces as they
    /// come, in the memory of a batch of statements and a piece of rows. Ends at the client's
    /// end marker, at the first statement that fails (unless `keepGoing`: its error is sent
    /// among the rows, the rest of its batch dropped, as `sqlite3` drops the rest of a line),
    /// or when the agent stops; the rows of the statements that ran go first, then the end
    /// marker of the rows.
    func runSQLStream(
        inDatabaseAtPath path: String, create: Bool, protection: ProtectionClass?, keepGoing: Bool, descriptor: FileDescriptor
    ) throws(DataProtectionError) {
        let socket = UnixSocket(adopting: descriptor.rawValue)
        defer { socket.close() }
        // Stopping shuts it down: rows blocked on a client that reads nothing end too.
        try server.tracking(socket) { () throws(DataProtectionError) in
            try stream(inDatabaseAtPath: path, create: create, protection: protection, keepGoing: keepGoing, on: socket)
        }
    }

    private func stream(inDatabaseAtPath path: String, create: Bool, protection: ProtectionClass?, keepGoing: Bool, on socket: UnixSocket)
        throws(DataProtectionError) {
        var rows = AgentSQLRowPieces(socket)
        var failure: DataProtectionError?
        do throws(DataProtectionError) {
            // Opening (perhaps creating), each batch and the closing (a checkpoint) are changes: they wait while a backup runs.
            let database = try server.storeGate.mutating { () throws(DataProtectionError) in
                try ProtectedDatabase(atPath: path, in: store, create: create, protection: ProtectionChoice(protection))
            }
            defer { server.storeGate.mutating { database.close() } }
            // At the discard of the database's key, rows not yet sent go, and so do statements not yet run.
            let watch = AgentDiscardWatch(device: device, protection: database.protectionClass)
            rows.watch = watch
            var input = AgentPieceReader(FileDescriptor(rawValue: socket.descriptor), limit: AgentWireFormat.maximumInlineData,
                                         describe: "the client's statements", watch: watch)
            defer { input.wipe() }
            var piecesRead = 0
            var statements = SQLStatementReader(reading: { () throws(DataProtectionError) -> [UInt8] in
                // What the last piece completed has run and its rows are sent: its acknowledgment.
                if piecesRead > 0 { rows.acknowledge() }
                piecesRead += 1
                return try input.next(cut: DataProtectionError(
                    .ioFailure, "The client's statements ended without their end marker: the rest did not run.")).map(Array.init) ?? []
            })
            while let sql = try statements.next() {
                server.noteActivity()
                defer { rows.flush() }
                do throws(DataProtectionError) {
                    try server.storeGate.mutating { () throws(DataProtectionError) in try database.execute(sql) { row in rows.append(row) } }
                } catch {
                    guard keepGoing else { throw error }
                    rows.report(error)
                }
                try rows.check()
            }
        } catch {
            failure = error
        }
        rows.finish()
        if let failure { throw failure }
    }
}

/// The rows of a `sqlStream`, sent to the client in pieces of at most 1 MiB (one row alone
/// when it is larger): each piece a row count and that many rows (§6, "Rows"); a piece of
/// no rows acknowledges a piece of statements.
struct AgentSQLRowPieces {
    private let socket: UnixSocket
    private var writer = AgentFieldWriter()
    private var count: UInt32 = 0
    /// Why the rows stopped going out (the client went away, the key was discarded): the statements stop too.
    private var failure: DataProtectionError?
    /// Stops the rows at the discard of the database's class key.
    var watch: AgentDiscardWatch?

    init(_ socket: UnixSocket) {
        self.socket = socket
    }

    /// The most bytes of rows in a piece (with its count, 1 MiB), unless one row alone is larger.
    private static let limit = AgentWireFormat.maximumInlineData - 4

    mutating func append(_ row: SQLiteRow) {
        guard failure == nil else { return }
        var encoded = AgentFieldWriter()
        defer { encoded.wipe() }
        AgentSQLRows.encode(row, into: &encoded)
        if count > 0, writer.bytes.count + encoded.bytes.count > Self.limit { flush() }
        writer.append(encoded)
        count += 1
        if writer.bytes.count >= Self.limit { flush() }
    }

    /// Sends the rows gathered so far.
    mutating func flush() {
        guard failure == nil, count > 0 else { return }
        var header = AgentFieldWriter()
        header.u32(count)
        var piece = header.bytes + writer.bytes
        do {
            try AgentPieceWriter.send(piece, on: socket, watch: watch)
        } catch let error as DataProtectionError {
            failure = error
        } catch {
            failure = DataProtectionError(.ioFailure, "The client stopped reading the rows: \(error).")
        }
        Sodium.wipe(&piece)
        writer.wipe()
        writer = AgentFieldWriter()
        count = 0
    }

    /// Sends the rows gathered so far, then a piece of no rows: the acknowledgment of a piece of statements.
    mutating func acknowledge() {
        flush()
        guard failure == nil else { return }
        do {
            try AgentPieceWriter.send([0, 0, 0, 0], on: socket)
        } catch {
            failure = DataProtectionError(.ioFailure, "The client stopped reading the rows: \(error).")
        }
    }

    /// Sends the rows gathered so far, then `error` (a statement failed and the stream goes on).
    mutating func report(_ error: DataProtectionError) {
        flush()
        guard failure == nil else { return }
        do {
            try AgentPieceWriter.send(AgentSQLRows.failureMark + AgentResponse.failure(error).encoded(), on: socket)
        } catch {
            failure = DataProtectionError(.ioFailure, "The client stopped reading the rows: \(error).")
        }
    }

    /// Throws when the rows could not be sent.
    func check() throws(DataProtectionError) {
        if let failure { throw failure }
    }

    /// Sends what is left, then the end marker.
    mutating func finish() {
        flush()
        guard failure == nil else { return }
        try? AgentPieceWriter.end(on: socket)
    }
}
