import DataProtection
import Foundation
import Logging
import SocketBridge
import SodiumBridge
import SystemPackage

/// One client connection inside the agent (of this user: the server checked): its hello
/// within the server's hello timeout, then its requests one at a time; its handles are
/// closed (flushed) when it goes.
final class AgentSession {
    let server: AgentServer
    let channel: AgentChannel
    var handles: [UInt32: ProtectedFileHandle] = [:]
    var nextHandle: UInt32 = 1
    /// Set by a request whose answer carries plaintext of a class that locks (`read`, an
    /// inline `readFile`, `sql`): the answer is not delivered once that class's key is gone.
    var contentWatch: AgentDiscardWatch?
    /// Set by a request whose answer carries an item's secret: the answer's frame is wiped once sent.
    var answerIsSecret = false
    /// The protocol version this connection speaks (its hello's).
    private var version = AgentWireFormat.version
    var store: ProtectedStore { server.store }
    var device: Device { server.store.device }

    init(server: AgentServer, socket: UnixSocket) {
        self.server = server
        self.channel = AgentChannel(socket)
    }

    /// Serves until the client disconnects, breaks the protocol, or the agent stops.
    func serve() {
        defer { closeHandles() }
        // The peer's user was checked at accept (AgentServer.run).
        do {
            guard try hello() else { return }
            while let (payload, descriptor) = try channel.receive() {
                var payload = payload
                let request = try AgentRequest.decode(payload)
                if request.carriesPasscode { Sodium.wipe(&payload) }
                guard descriptor == nil || request.takesDescriptor else {
                    try? descriptor?.close()
                    throw AgentProtocolViolation("a descriptor with an operation that takes none")
                }
                if case .sqlStream = request, version < 2 {
                    try? descriptor?.close()
                    throw AgentProtocolViolation("sqlStream on a connection of protocol version \(version)")
                }
                if request.countsAsActivity { server.noteActivity() }
                if case .watch = request { return watch() }
                let response: AgentResponse
                do {
                    response = try request.changesStore
                        ? server.storeGate.mutating { () throws(DataProtectionError) in try perform(request, descriptor: descriptor) }
                        : perform(request, descriptor: descriptor)
                } catch {
                    response = .failure(error)
                }
                defer {
                    contentWatch = nil
                    answerIsSecret = false
                }
                guard respond(response, watch: contentWatch) else { return }
                if case .stop = request {
                    server.stop()
                    return
                }
            }
        } catch let violation as AgentProtocolViolation {
            server.logger.notice("agent: closed a connection that broke the protocol", metadata: ["reason": "\(violation.reason)"])
        } catch {
            // The client went away.
        }
    }

    /// Answers a connection refused before its hello with `error`, in the frame a hello's
    /// answer takes (the caller closes it). A client that reads nothing loses only this frame.
    static func refuse(_ socket: UnixSocket, _ error: DataProtectionError) {
        try? AgentChannel(socket).send(AgentResponse.failure(error).encoded())
    }

    /// The first frame must be a hello of this protocol version, whole within the hello timeout.
    private func hello() throws -> Bool {
        let limit = server.configuration.helloTimeout
        let deadline = ContinuousClock.now + limit
        let socket = channel.socket
        let received = try channel.receive {
            let left = deadline - ContinuousClock.now
            guard left > .zero, try socket.waitUntilReadable(milliseconds: Int32(clamping: Int64(AgentServer.seconds(left) * 1000) + 1)) else {
                throw AgentProtocolViolation("no hello within \(AgentServer.seconds(limit)) s")
            }
        }
        guard let (payload, descriptor) = received else { return false }
        try? descriptor?.close()
        guard case .hello(let version) = try AgentRequest.decode(payload) else {
            throw AgentProtocolViolation("the first request is not hello")
        }
        guard AgentWireFormat.versions.contains(version) else {
            let spoken = AgentWireFormat.versions.map(String.init).joined(separator: " and ")
            respond(.failure(DataProtectionError(.invalidArgument,
                "The agent speaks protocol versions \(spoken); this client speaks \(version).",
                hint: "Use a dpctl and library of the same release as the agent, or restart the agent.")))
            return false
        }
        self.version = version
        var writer = AgentFieldWriter()
        writer.u32(version)
        writer.u32(UInt32(bitPattern: getpid()))
        server.noteGreeted(channel.socket)
        return respond(.ok(writer.bytes))
    }

    @discardableResult
    private func respond(_ response: AgentResponse) -> Bool {
        do {
            try channel.send(response.encoded(), wiping: answerIsSecret)
            return true
        } catch {
            return false
        }
    }

    /// Sends `response`, whose plaintext `watch` guards: a failure instead once the key
    /// went, and the connection closed (`false`) if it goes while a client that reads
    /// slowly, or not at all, is still being sent the answer. See ``AgentDiscardWatch``.
    private func respond(_ response: AgentResponse, watch: AgentDiscardWatch?) -> Bool {
        guard let watch else { return respond(response) }
        do throws(DataProtectionError) {
            try watch.check()
        } catch {
            return respond(.failure(error))
        }
        var frame = withUnsafeBytes(of: UInt32(0).bigEndian) { Array($0) }
        frame += response.encoded()
        let length = UInt32(frame.count - 4).bigEndian
        withUnsafeBytes(of: length) { for index in 0..<4 { frame[index] = $0[index] } }
        defer { Sodium.wipe(&frame) }
        do {
            try frame.withUnsafeBytes { try AgentDiscardWatch.send($0, on: channel.socket, watch: watch) }
            return true
        } catch {
            return false
        }
    }

    /// Closes (flushes) the handles left open: a change of the store, so it waits while a backup runs.
    private func closeHandles() {
        guard !handles.isEmpty else { return }
        server.storeGate.mutating {
            for handle in handles.values { try? handle.close() }
        }
        handles.removeAll()
    }

    // MARK: - Watching

    /// Sends every notification from now on until the client hangs up. A client that does
    /// not read stalls only its own connection: events wait in a queue of their own.
    private func watch() {
        let queue = AgentEventQueue()
        let observation = device.addObserver { notification in
            queue.push(.event(AgentEvent(notification: notification, date: Date())))
        }
        defer { observation.cancel() }
        let stopSessionEvents = server.sessionEvents.observe { event in queue.push(.sessionEvent(event)) }
        defer { stopSessionEvents() }
        // Watching before the answer: nothing posted after the client hears `ok` is missed.
        guard respond(.ok([])) else { return }
        while true {
            for event in queue.take(waitingUpTo: 0.2) {
                guard respond(event) else { return }
            }
            // Anything from the client on a watching connection, or its end, ends the watch.
            if (try? channel.socket.waitUntilReadable(milliseconds: 0)) != false { return }
        }
    }
}

/// Notifications and session events waiting for a watching connection's thread.
final class AgentEventQueue: Sendable {
    private let events = NSCondition()
    nonisolated(unsafe) private var pending: [AgentResponse] = []

    func push(_ event: AgentResponse) {
        events.lock()
        pending.append(event)
        events.signal()
        events.unlock()
    }

    func take(waitingUpTo seconds: Double) -> [AgentResponse] {
        events.lock()
        defer { events.unlock() }
        if pending.isEmpty { _ = events.wait(until: Date(timeIntervalSinceNow: seconds)) }
        defer { pending.removeAll() }
        return pending
    }
}
