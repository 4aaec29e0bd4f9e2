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
    private let channel: Locked<AgentChannel>

    init(socketPath: String) throws(DataProtectionError) {
        let socket: UnixSocket
        do {
            socket = try UnixSocket.connect(to: socketPath)
        } catch {
            throw DataProtectionError(
                error.isDisconnection ? .fileNotFound : .ioFailure, "No agent answers at \(socketPath) (\(error)).",
                hint: "Start one: `dpctl agent start`.")
        }
        let channel = AgentChannel(socket)
        let body = try Self.exchange(channel, .hello(version: AgentWireFormat.version), passing: nil)
        do {
            var reader = AgentFieldReader(body)
            _ = try reader.u32()
            agentProcessIdentifier = Int32(bitPattern: try reader.u32())
            try reader.finish()
        } catch {
            throw Self.broken(error)
        }
        self.socketPath = socketPath
        self.channel = Locked(channel)
    }

    /// Sends `request` and returns the body of the agent's `ok`; a failure is thrown.
    func call(_ request: AgentRequest, passing descriptor: FileDescriptor? = nil) throws(DataProtectionError) -> [UInt8] {
        try Self.body(of: try respond(request, passing: descriptor))
    }

    /// Sends `request` and returns the agent's `ok` or `descriptorNeeded`; a failure is thrown.
    func respond(_ request: AgentRequest, passing descriptor: FileDescriptor? = nil) throws(DataProtectionError) -> AgentResponse {
        try channel.withLock { channel throws(DataProtectionError) in
            try Self.send(channel, request, passing: descriptor)
            return try Self.receive(channel)
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
            let response = try Self.receive(channel)
            if let failure { throw failure }
            return try Self.body(of: response)
        }
    }

    /// The connection for a `watch`: it carries events only from then on.
    func startWatching() throws(DataProtectionError) -> AgentChannel {
        try channel.withLock { channel throws(DataProtectionError) in
            _ = try Self.exchange(channel, .watch, passing: nil)
            return channel
        }
    }

    func close() {
        channel.withLock { $0.socket.close() }
    }

    private static func exchange(_ channel: AgentChannel, _ request: AgentRequest, passing descriptor: FileDescriptor?)
        throws(DataProtectionError) -> [UInt8] {
        try send(channel, request, passing: descriptor)
        return try body(of: try receive(channel))
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

    /// The next response: `ok` or `descriptorNeeded`; a failure is thrown.
    private static func receive(_ channel: AgentChannel) throws(DataProtectionError) -> AgentResponse {
        let response: AgentResponse
        do {
            guard let (payload, descriptor) = try channel.receive() else {
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
        case .event: throw broken(AgentProtocolViolation("an event on a connection that is not watching"))
        }
    }

    static func broken(_ error: any Error) -> DataProtectionError {
        DataProtectionError(.ioFailure, "The connection to the agent failed: \(error).")
    }
}
