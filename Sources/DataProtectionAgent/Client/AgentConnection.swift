import DataProtection
import Foundation
import SodiumBridge
import SocketBridge
import SystemPackage

/// One connection to an agent: the hello, then one request at a time (calls from
/// several threads take turns).
final class AgentConnection: Sendable {
    let socketPath: String
    let agentProcessIdentifier: Int32

    let watchdog: AgentWatchdog
    private let channel: Locked<AgentChannel>

    /// Connects to the agent at `socketPath` after checking that it is this user's: the
    /// socket's directory (``SocketDirectoryTrust``), then the listener's user
    /// (`SO_PEERCRED`), before a byte is sent. The hello must come within `patience.hello`.
    init(socketPath: String, patience: AgentPatience = AgentPatience()) throws(DataProtectionError) {
        let user = geteuid()
        let trustedPath: String
        do {
            trustedPath = try SocketDirectoryTrust.verifiedPath(ofSocket: socketPath, user: user)
        } catch {
            switch error {
            case .missing(let directory):
                throw DataProtectionError(.fileNotFound, "No agent answers at \(socketPath) (\(directory) does not exist).",
                                          hint: "Start one: `dpctl agent start`.")
            case .untrusted(let directory, let reason):
                throw DataProtectionError(
                    .notPermitted, "The agent's socket \(socketPath) is not trusted: its directory \(directory) is unsafe (\(reason)). Nothing was sent to it.",
                    hint: "Another user could listen there in your agent's place. Make \(directory) yours and closed to others (chmod 700), or set XDG_RUNTIME_DIR to a directory only you can write.")
            }
        }
        let start = ContinuousClock.now
        let socket: UnixSocket
        do {
            socket = try UnixSocket.connect(to: trustedPath, within: Self.milliseconds(patience.hello))
            // A send that moves nothing for this long fails (an agent that stopped reading).
            try socket.setSendTimeout(milliseconds: Self.milliseconds(patience.silence))
        } catch where error.errno == EAGAIN {
            throw DataProtectionError(
                .ioFailure, "The agent at \(socketPath) accepted no connection within \(Int(AgentServer.seconds(patience.hello))) s.",
                hint: "Is it stopped or stuck? `dpctl agent stop`, or end its process and `dpctl agent start`.")
        } catch {
            throw DataProtectionError(
                error.isDisconnection ? .fileNotFound : .ioFailure, "No agent answers at \(socketPath) (\(error)).",
                hint: "Start one: `dpctl agent start`.")
        }
        let peer: (pid: Int32, uid: UInt32, gid: UInt32)
        do {
            peer = try socket.peerCredentials()
        } catch {
            socket.close()
            throw Self.broken(error)
        }
        guard peer.uid == user else {
            socket.close()
            throw DataProtectionError(
                .notPermitted,
                "The process listening at \(socketPath) (pid \(peer.pid)) runs as user \(peer.uid), not as you (user \(user)): it is not your agent. Nothing was sent to it.",
                hint: "Someone else listens in your agent's place: remove \(socketPath) (and find out who put it there), then `dpctl agent start`.")
        }
        let channel = AgentChannel(socket)
        let watchdog = AgentWatchdog(agentProcessIdentifier: peer.pid, socketPath: socketPath, patience: patience)
        let body: [UInt8]
        do throws(DataProtectionError) {
            try Self.send(channel, .hello(version: AgentWireFormat.version), passing: nil)
            body = try Self.body(of: try Self.receive(channel, watchdog: watchdog, deadline: start + patience.hello))
        } catch {
            socket.close()
            throw error
        }
        do {
            var reader = AgentFieldReader(body)
            _ = try reader.u32()
            agentProcessIdentifier = Int32(bitPattern: try reader.u32())
            try reader.finish()
        } catch {
            socket.close()
            throw Self.broken(error)
        }
        self.socketPath = socketPath
        self.watchdog = AgentWatchdog(agentProcessIdentifier: agentProcessIdentifier, socketPath: socketPath, patience: patience)
        self.channel = Locked(channel)
    }

    static func milliseconds(_ duration: Duration) -> Int32 {
        Int32(clamping: Int64(AgentServer.seconds(duration) * 1000))
    }

    /// Sends `request` and returns the body of the agent's `ok`; a failure is thrown.
    func call(_ request: AgentRequest, passing descriptor: FileDescriptor? = nil) throws(DataProtectionError) -> [UInt8] {
        try Self.body(of: try respond(request, passing: descriptor))
    }

    /// Sends `request` and returns the agent's `ok` or `descriptorNeeded`; a failure is thrown.
    func respond(_ request: AgentRequest, passing descriptor: FileDescriptor? = nil) throws(DataProtectionError) -> AgentResponse {
        try channel.withLock { channel throws(DataProtectionError) in
            try Self.send(channel, request, passing: descriptor)
            return try Self.receive(channel, watchdog: watchdog, waitingOnOthers: Self.isOutsideParty(descriptor))
        }
    }

    /// Like ``call(_:passing:)``, running `during` after the request is sent and before the
    /// response is read (feeding or draining a descriptor's other end).
    func call(_ request: AgentRequest, passing descriptor: FileDescriptor, during: () throws(DataProtectionError) -> Void)
        throws(DataProtectionError) -> [UInt8] {
        try channel.withLock { channel throws(DataProtectionError) in
            try Self.send(channel, request, passing: descriptor)
            var failure: DataProtectionError?
            do throws(DataProtectionError) { try during() } catch { failure = error }
            let response = try Self.receive(channel, watchdog: watchdog, waitingOnOthers: Self.isOutsideParty(descriptor))
            if let failure { throw failure }
            return try Self.body(of: response)
        }
    }

    /// The connection for a `watch`: it carries events only from then on.
    func startWatching() throws(DataProtectionError) -> AgentChannel {
        try channel.withLock { channel throws(DataProtectionError) in
            try Self.send(channel, .watch, passing: nil)
            _ = try Self.body(of: try Self.receive(channel, watchdog: watchdog))
            return channel
        }
    }

    func close() {
        channel.withLock { $0.socket.close() }
    }

    private static func body(of response: AgentResponse) throws(DataProtectionError) -> [UInt8] {
        guard case .ok(let body) = response else { throw broken(AgentProtocolViolation("an answer the request does not take")) }
        return body
    }

    private static func send(_ channel: AgentChannel, _ request: AgentRequest, passing descriptor: FileDescriptor?) throws(DataProtectionError) {
        do {
            try channel.send(request.encoded(), passing: descriptor, wiping: request.carriesPasscode)
        } catch {
            throw broken(error)
        }
    }

    /// Whether the agent, working on `descriptor`, may wait on someone other than itself
    /// (a pipe's writer or reader, a terminal): anything but a regular file.
    private static func isOutsideParty(_ descriptor: FileDescriptor?) -> Bool {
        guard let descriptor else { return false }
        var status = stat()
        return fstat(descriptor.rawValue, &status) != 0 || status.st_mode & S_IFMT != S_IFREG
    }

    /// The next response: `ok` or `descriptorNeeded`; a failure is thrown. Waits as
    /// `watchdog` allows (until `deadline`, for the hello).
    private static func receive(
        _ channel: AgentChannel, watchdog: AgentWatchdog, deadline: ContinuousClock.Instant? = nil, waitingOnOthers: Bool = false
    ) throws(DataProtectionError) -> AgentResponse {
        let response: AgentResponse
        do {
            let received = try channel.receive { () throws(DataProtectionError) in
                try watchdog.waitReadable(channel.socket, deadline: deadline, waitingOnOthers: waitingOnOthers)
            }
            guard let (payload, descriptor) = received else {
                throw DataProtectionError(.ioFailure, "The agent closed the connection.", hint: "Is it still running? `dpctl status`.")
            }
            try? descriptor?.close()
            response = try AgentResponse.decode(payload)
        } catch let error as DataProtectionError {
            throw error
        } catch {
            throw broken(error)
        }
        switch response {
        case .ok, .descriptorNeeded: return response
        case .failure(let error): throw error
        case .event, .sessionEvent: throw broken(AgentProtocolViolation("an event on a connection that is not watching"))
        }
    }

    static func broken(_ error: any Error) -> DataProtectionError {
        DataProtectionError(.ioFailure, "The connection to the agent failed: \(error).")
    }
}
