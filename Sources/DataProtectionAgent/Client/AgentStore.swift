import DataProtection
import DataProtectionSQLite
import Foundation
import SocketBridge
import SystemPackage

/// A store served by an agent (`dpctl agent start`, or an ``AgentServer`` in another
/// program): the surface of `ProtectedStore`, carried out inside the agent.
///
/// Every operation follows the agent's device and its class rules, exactly as if it ran
/// there: a `complete` file fails with `protectedDataUnavailable` once the agent has
/// locked, however long this client has been connected. Handles live in the agent and are
/// closed (flushed) when this client disconnects. Safe to use from several threads (calls
/// take turns on the one connection; open more clients for parallel work).
public final class AgentStore: ProtectedFileSystem {
    /// The agent's socket.
    public var socketPath: String { connection.socketPath }
    /// The agent's process identifier.
    public var agentProcessIdentifier: Int32 { connection.agentProcessIdentifier }
    /// The agent's device.
    public let device: AgentDevice

    let connection: AgentConnection

    /// Connects to the agent listening at `socketPath`
    /// (see ``AgentSocketLocation/path(deviceDirectory:storeIdentifier:environment:)``).
    ///
    /// Before a byte is sent, the socket's directory and the listener's user are checked
    /// (`Keys/agent-protocol.md` §7): a socket another user could have put there, or a
    /// listener of another user, is refused. `patience` bounds the waits for a silent agent.
    ///
    /// - Throws: `fileNotFound` when no agent listens there; `notPermitted` when the socket's
    ///   directory is not safe, the listener is not of this user, or the agent serves another
    ///   user; `ioFailure` when the agent does not answer within `patience`.
    public init(socketPath: String, patience: AgentPatience = AgentPatience()) throws(DataProtectionError) {
        connection = try AgentConnection(socketPath: socketPath, patience: patience)
        device = AgentDevice(connection: connection)
    }

    /// Disconnects now (the agent closes this client's handles); otherwise the connection
    /// ends when the store, its device and its handles are all released.
    public func close() { connection.close() }

    /// The agent's device and timers.
    public func status() throws(DataProtectionError) -> AgentStatus {
        try Self.decode(try connection.call(.status), AgentStatus.decode)
    }

    /// Stops the agent: a reboot (handles flushed and closed, keys wiped), then it exits.
    public func stopAgent() throws(DataProtectionError) {
        _ = try connection.call(.stop)
    }

    // MARK: - Whole files

    /// Writes `data` to the file at `path`, atomically, in the agent (inline up to 1 MiB, else in pieces).
    public func write(_ data: Data, to path: String, protection protectionChoice: ProtectionChoice = .inherited, options: Data.WritingOptions = []) throws(DataProtectionError) {
        let protection = protectionChoice.protectionClass ?? ProtectionClass(writingOptions: options)
        let exclusive = options.contains(.withoutOverwriting)
        guard data.count > AgentWireFormat.maximumInlineData else {
            _ = try connection.call(.writeFile(path: path, protection: protection, exclusive: exclusive, source: .inline(data)))
            return
        }
        var offset = 0
        try write(to: path, protection: ProtectionChoice(protection), exclusive: exclusive) { () throws(DataProtectionError) -> Data? in
            guard offset < data.count else { return nil }
            let end = min(data.count, offset + AgentWireFormat.maximumInlineData)
            defer { offset = end }
            return data.subdata(in: offset..<end)
        }
    }

    /// Writes a file from the pieces `next` returns, streamed to the agent over a socket pair;
    /// a source that fails stores nothing, and its error is thrown as it is.
    public func write(
        to path: String, protection protectionChoice: ProtectionChoice, exclusive: Bool, from next: () throws(DataProtectionError) -> Data?
    ) throws(DataProtectionError) {
        let protection = protectionChoice.protectionClass
        let (mine, theirs) = try Self.pair()
        defer { mine.close() }
        var failure: DataProtectionError?
        let request = AgentRequest.writeFile(path: path, protection: protection, exclusive: exclusive, source: .pieces)
        do throws(DataProtectionError) {
            _ = try connection.call(request, passing: FileDescriptor(rawValue: theirs.descriptor)) { () throws(DataProtectionError) in
                theirs.close()
                defer { mine.close() }
                do throws(SocketError) {
                    while true {
                        let piece: Data?
                        do throws(DataProtectionError) {
                            piece = try next()
                        } catch {
                            // Closing without the end marker: the agent stores nothing.
                            failure = error
                            return
                        }
                        guard let piece else { break }
                        _ = try AgentPieceWriter.send(splitting: piece, on: mine)
                    }
                    try AgentPieceWriter.end(on: mine)
                } catch where error.isDisconnection {
                    // The agent stopped reading: its answer says why.
                } catch {
                    failure = DataProtectionError(.ioFailure, "Sending the file to the agent failed: \(error).")
                }
            }
        } catch {
            // The source's own failure is the cause; the agent's "ended before its end marker" follows from it.
            throw failure ?? error
        }
    }

    /// Stores what `descriptor` holds from its current offset to its end at `path`: the
    /// agent reads it directly (the descriptor is passed over the socket; no copy through
    /// this process). Ends at the end of a file or when a pipe's writers close it.
    public func write(contentsOf descriptor: FileDescriptor, to path: String, protection protectionChoice: ProtectionChoice = .inherited, exclusive: Bool = false)
        throws(DataProtectionError) {
        let protection = protectionChoice.protectionClass
        _ = try connection.call(.writeFile(path: path, protection: protection, exclusive: exclusive, source: .descriptor), passing: descriptor)
    }

    /// The whole content of the file at `path` (larger than 1 MiB: streamed through a socket pair).
    public func contents(atPath path: String) throws(DataProtectionError) -> Data {
        let response = try connection.respond(.readFile(path: path))
        guard case .descriptorNeeded(let size) = response else {
            guard case .ok(let body) = response else { throw AgentConnection.broken(AgentProtocolViolation("an answer readFile does not take")) }
            return try Self.decode(body, AgentReply.data)
        }
        let (mine, theirs) = try Self.pair()
        var data = Data(capacity: Int(clamping: size))
        _ = try connection.call(.readFile(path: path), passing: FileDescriptor(rawValue: theirs.descriptor)) { () throws(DataProtectionError) in
            theirs.close()
            defer { mine.close() }
            var buffer = [UInt8](repeating: 0, count: 1 << 16)
            while true {
                let count: Int
                try connection.watchdog.waitReadable(mine)
                do {
                    count = try mine.receive(into: &buffer).count
                } catch {
                    throw AgentConnection.broken(error)
                }
                if count == 0 { break }
                data.append(contentsOf: buffer[0..<count])
            }
        }
        return data
    }

    /// Whether `error` says that the output of ``copyContents(atPath:to:)`` lost its reader
    /// (a pipe closed early): for a command line, a reason to end quietly.
    public static func isOutputClosed(_ error: DataProtectionError) -> Bool {
        error.code == .ioFailure && error.message == AgentWireFormat.outputClosed.message
    }

    /// Writes the file at `path` into `descriptor` (a local file, pipe, terminal): the agent
    /// writes it directly. Returns the number of bytes written. A pipe whose reader went away
    /// fails with an error for which ``isOutputClosed(_:)`` is true.
    @discardableResult
    public func copyContents(atPath path: String, to descriptor: FileDescriptor) throws(DataProtectionError) -> UInt64 {
        try Self.decode(try connection.call(.readFile(path: path), passing: descriptor), AgentReply.u64)
    }

    // MARK: - Items

    /// Type, size, class and dates of the item at `path`.
    public func attributesOfItem(atPath path: String) throws(DataProtectionError) -> ProtectedItemAttributes {
        try Self.decode(try connection.call(.attributes(path: path)), ProtectedItemAttributes.decode)
    }

    /// Whether something exists at `path`.
    public func fileExists(atPath path: String) -> Bool {
        (try? attributesOfItem(atPath: path)) != nil
    }

    /// Whether something exists at `path`, and whether it is a directory.
    public func fileExists(atPath path: String, isDirectory: inout Bool) -> Bool {
        guard let attributes = try? attributesOfItem(atPath: path) else { return false }
        isDirectory = attributes.type == .directory
        return true
    }

    /// The names directly inside the directory at `path`.
    public func contentsOfDirectory(atPath path: String) throws(DataProtectionError) -> [String] {
        try Self.decode(try connection.call(.list(path: path)), AgentReply.names)
    }

    /// Creates a directory (and, by default, its missing parents).
    public func createDirectory(atPath path: String, withIntermediateDirectories: Bool = true, protection protectionChoice: ProtectionChoice = .inherited)
        throws(DataProtectionError) {
        let protection = protectionChoice.protectionClass
        try empty(.createDirectory(path: path, intermediates: withIntermediateDirectories, protection: protection))
    }

    /// Removes a file or an empty directory.
    public func removeItem(atPath path: String) throws(DataProtectionError) {
        try empty(.remove(path: path))
    }

    /// Moves or renames a file or directory.
    public func moveItem(atPath source: String, toPath destination: String) throws(DataProtectionError) {
        try empty(.move(from: source, to: destination))
    }

    /// Copies a file (re-encrypted under `protection`, else the source's class).
    public func copyItem(atPath source: String, toPath destination: String, protection protectionChoice: ProtectionChoice = .inherited) throws(DataProtectionError) {
        let protection = protectionChoice.protectionClass
        try empty(.copy(from: source, to: destination, protection: protection))
    }

    /// Changes the class of a file (re-encrypting its key) or a directory.
    public func setProtectionClass(_ protectionClass: ProtectionClass, ofItemAtPath path: String) throws(DataProtectionError) {
        try empty(.setProtection(path: path, protection: protectionClass))
    }

    // MARK: - Handles

    /// Opens a handle, which lives in the agent, on the file at `path`.
    public func openFile(atPath path: String, mode: ProtectedFileHandle.Mode = .update, create: Bool = false, protection protectionChoice: ProtectionChoice = .inherited)
        throws(DataProtectionError) -> AgentFileHandle {
        let protection = protectionChoice.protectionClass
        let identifier = try Self.decode(try connection.call(.open(path: path, mode: mode, create: create, protection: protection)), AgentReply.u32)
        return AgentFileHandle(connection: connection, identifier: identifier, mode: mode)
    }

    // MARK: - Plumbing

    private func empty(_ request: AgentRequest) throws(DataProtectionError) {
        try Self.decode(try connection.call(request), AgentReply.empty)
    }

    /// Decodes a reply body; a malformed one is a broken connection.
    static func decode<T>(_ body: [UInt8], _ parse: ([UInt8]) throws(AgentProtocolViolation) -> T) throws(DataProtectionError) -> T {
        do {
            return try parse(body)
        } catch {
            throw AgentConnection.broken(error)
        }
    }

    static func pair() throws(DataProtectionError) -> (UnixSocket, UnixSocket) {
        do {
            return try UnixSocket.pair()
        } catch {
            throw DataProtectionError(.ioFailure, "Cannot make a data channel to the agent: \(error).")
        }
    }

}
