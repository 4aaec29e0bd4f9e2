import DataProtection
import DataProtectionSQLite
import Foundation
import SocketBridge
import SodiumBridge
import SystemPackage

// Databases in the agent: statements streamed to it, rows streamed back (`sqlStream`,
// `Keys/agent-protocol.md` §4), so that a script or a result of any size goes through in
// bounded memory, and each statement of an interactive session runs once it is typed.
extension AgentStore {
    /// Runs `sql` (one or more statements) on the protected database at `path`, inside the
    /// agent, and returns the rows every statement returned (as `ProtectedDatabase.execute`
    /// with a row handler would). The database is opened and closed for the call.
    ///
    /// - Parameters:
    ///   - sql: one or more statements, of any length.
    ///   - path: the database's path in the agent's store.
    ///   - create: create the database when missing.
    ///   - protectionChoice: the class of a database created now, else its directory's.
    /// - Throws: as `ProtectedDatabase` (`protectedDataUnavailable` once the agent's device has
    ///   discarded the class key, `sqliteError`): the statements before the one that failed have run.
    public func executeSQL(_ sql: String, inDatabaseAtPath path: String, create: Bool = false, protection protectionChoice: ProtectionChoice = .inherited)
        throws(DataProtectionError) -> [SQLiteRow] {
        var rows: [SQLiteRow] = []
        try executeSQL(sql, inDatabaseAtPath: path, create: create, protection: protectionChoice) { rows.append($0) }
        return rows
    }

    /// Runs `sql` as ``executeSQL(_:inDatabaseAtPath:create:protection:)`` does, handing each
    /// row to `forEachRow` as it comes back (a result of any size in bounded memory).
    public func executeSQL(
        _ sql: String, inDatabaseAtPath path: String, create: Bool = false, protection protectionChoice: ProtectionChoice = .inherited,
        forEachRow: (SQLiteRow) -> Void
    ) throws(DataProtectionError) {
        let text = Locked<Data?>(Data(sql.utf8))
        try executeSQL(inDatabaseAtPath: path, create: create, protection: protectionChoice,
                       reading: { text.withLock { pending in defer { pending = nil }; return pending } },
                       forEachRow: forEachRow)
    }

    /// Runs the SQL that `next` returns, piece after piece (`nil` at its end), on the
    /// protected database at `path`, inside the agent, as `sqlite3` runs a script: each
    /// complete statement as soon as its piece has arrived, its rows handed to `forEachRow`
    /// as they come back. Pieces may end anywhere, inside a statement or a string; a
    /// statement left without its semicolon at the end runs as it is. `afterRows` is called
    /// after each batch of rows (to flush an output). The database is opened and closed for the call.
    ///
    /// `next` is called on a thread of its own, until it returns `nil` or throws, or its piece
    /// can no longer be sent (the agent ended the statements): a `next` that waits (a terminal)
    /// keeps that thread until it returns. With `waitingForEachPiece`, `next` is called again
    /// only once the agent has run what the last piece completed and its rows have gone to
    /// `forEachRow` and `afterRows`: for a terminal, where the next prompt follows the rows.
    /// With `onError`, a statement that fails does not end the script: its error goes to
    /// `onError`, the rest of its piece's statements are dropped (as `sqlite3` drops the rest
    /// of a line at a terminal) and the next pieces run.
    ///
    /// - Throws: as ``executeSQL(_:inDatabaseAtPath:create:protection:)``; the error `next`
    ///   threw (the statements not yet run do not run).
    public func executeSQL(
        inDatabaseAtPath path: String, create: Bool = false, protection protectionChoice: ProtectionChoice = .inherited,
        reading next: @escaping @Sendable () throws(DataProtectionError) -> Data?, waitingForEachPiece: Bool = false,
        forEachRow: (SQLiteRow) -> Void, afterRows: () -> Void = {}, onError: ((DataProtectionError) -> Void)? = nil
    ) throws(DataProtectionError) {
        let (mine, theirs) = try Self.pair()
        // Both threads use `mine`: the last one done closes it (a descriptor closed under a
        // thread still sending could be reused by an unrelated open).
        let users = Locked(2)
        @Sendable func release() {
            if users.withLock({ count in count -= 1; return count == 0 }) { mine.close() }
        }
        let sourceFailure = Locked<DataProtectionError?>(nil)
        // Acknowledgments of pieces, for a sender that waits for each (and once more at the end).
        let acknowledged = DispatchSemaphore(value: 0)
        let ended = Locked(false)
        @Sendable func acknowledgment() -> Bool {
            acknowledged.wait()
            return !ended.withLock { $0 }
        }
        let wait: (@Sendable () -> Bool)? = waitingForEachPiece ? acknowledgment : nil
        defer {
            ended.withLock { $0 = true }
            acknowledged.signal()
        }
        let request = AgentRequest.sqlStream(path: path, create: create, protection: protectionChoice.protectionClass,
                                             keepGoing: onError != nil)
        defer {
            mine.shutdown()  // wakes the sending thread if it is blocked on a full socket
            release()
        }
        do {
            _ = try connection.call(request, passing: FileDescriptor(rawValue: theirs.descriptor)) { () throws(DataProtectionError) in
                theirs.close()
                Thread.detachNewThread {
                    defer { release() }
                    Self.send(next, on: mine, failure: sourceFailure, waiting: wait)
                }
                var pieces = AgentPieceReader(FileDescriptor(rawValue: mine.descriptor), limit: Int(UInt32.max), describe: "the agent's rows")
                // The agent may wait as long as the statements take to come: only a stopped or gone agent ends the wait.
                let watchdog = connection.watchdog
                pieces.beforeRead = { () throws(DataProtectionError) in try watchdog.waitReadable(mine, waitingOnOthers: true) }
                while let piece = try pieces.next(cut: DataProtectionError(
                    .ioFailure, "The agent's rows ended without their end marker.", hint: "Is it still running? `dpctl status`.")) {
                    if piece.starts(with: AgentSQLRows.failureMark), let onError {
                        guard case .failure(let error) = try? AgentResponse.decode(Array(piece.dropFirst(4))) else {
                            throw AgentConnection.broken(AgentProtocolViolation("a malformed report of a failed statement"))
                        }
                        onError(error)
                        afterRows()
                        continue
                    }
                    let rows: [SQLiteRow]
                    do {
                        rows = try AgentSQLRows.decode(Array(piece), fieldLimit: piece.count)
                    } catch {
                        throw AgentConnection.broken(error)
                    }
                    guard !rows.isEmpty else {
                        acknowledged.signal()  // a piece of statements has run
                        continue
                    }
                    for row in rows { forEachRow(row) }
                    afterRows()
                }
            }
        } catch {
            // The source's own failure is the cause; the agent's "ended without their end marker" follows from it.
            if let failure = sourceFailure.withLock({ $0 }) {
                throw failure
            }
            throw error
        }
    }

    /// Sends what `next` returns in pieces of at most 1 MiB, then the end marker; a source
    /// that fails ends the stream without it (the agent runs nothing more). With `waiting`,
    /// waits for each piece's acknowledgment before the next call of `next` (`false`: the stream ended).
    private static func send(_ next: () throws(DataProtectionError) -> Data?, on socket: UnixSocket, failure: Locked<DataProtectionError?>,
                             waiting: (() -> Bool)?) {
        do throws(SocketError) {
            while true {
                let piece: Data?
                do throws(DataProtectionError) {
                    piece = try next()
                } catch {
                    failure.withLock { $0 = error }
                    socket.shutdownWriting()
                    return
                }
                guard let piece else { break }
                let sent = try AgentPieceWriter.send(splitting: piece, on: socket)
                if let waiting {
                    for _ in 0..<sent {
                        guard waiting() else { return }
                    }
                }
            }
            try AgentPieceWriter.end(on: socket)
        } catch {
            // The agent stopped reading (its answer says why), or the channel broke: it sees the end without the marker.
            if !error.isDisconnection { socket.shutdownWriting() }
        }
    }
}
