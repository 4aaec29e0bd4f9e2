import DataProtection
import Foundation
import SodiumBridge
import Logging
import SocketBridge

/// The agent: one process that owns a store and serves it to other processes of the
/// same user over a Unix-domain socket (`Keys/agent-protocol.md`).
///
/// Each connection gets a thread. Every request is carried out on the agent's own
/// `ProtectedStore` and device, so clients see one device: its state, its class rules,
/// its notifications; a client's handles live here and are closed (flushed) when it
/// disconnects. After ``Configuration/autoLock`` with no client request the agent locks
/// the device. ``stop()`` is a reboot: connections end, handles are flushed and closed,
/// keys are wiped.
public final class AgentServer: Sendable {
    /// How the agent behaves.
    public struct Configuration: Sendable, Hashable {
        /// Lock the device after this long with no client request (`nil`: never).
        public var autoLock: Duration?
        /// The most connections served at once (more wait in the listen queue).
        public var maximumConnections: Int

        /// The agent's rules: auto-lock after `autoLock` idle (`nil`: never), at most `maximumConnections` served at once.
        public init(autoLock: Duration? = .seconds(300), maximumConnections: Int = 1024) {
            self.autoLock = autoLock
            self.maximumConnections = maximumConnections
        }
    }

    /// The store served.
    public let store: ProtectedStore
    /// Where the agent listens.
    public let socketPath: String
    /// How it behaves.
    public let configuration: Configuration

    let logger = Logger(label: "DataProtection.agent")
    private let listener: UnixSocket
    private let state = Locked(State())
    private let finished = DispatchSemaphore(value: 0)

    struct State {
        var lastActivity = ContinuousClock.now
        var connections: [ObjectIdentifier: UnixSocket] = [:]
        /// Data channels in use (a `sqlStream`'s socket): stopping shuts them down too, so that
        /// a request blocked on a client that neither sends nor reads ends at once.
        var dataChannels: [ObjectIdentifier: UnixSocket] = [:]
        var stopping = false
    }

    /// Starts listening at `socketPath` for `store` (served once ``run()`` is called).
    ///
    /// A socket file left by an agent that died is replaced; a live agent at the path is
    /// `DataProtectionError/Code/storeBusy`.
    public init(store: ProtectedStore, socketPath: String, configuration: Configuration = Configuration()) throws(DataProtectionError) {
        try AgentSocketLocation.prepareDirectory(of: socketPath)
        if let live = try? UnixSocket.connect(to: socketPath) {
            live.close()
            throw DataProtectionError(.storeBusy, "An agent already listens at \(socketPath).", hint: "Stop it first: `dpctl agent stop`.")
        }
        unlink(socketPath)
        do {
            listener = try UnixSocket.listen(at: socketPath)
        } catch {
            throw DataProtectionError(.ioFailure, "The agent cannot listen: \(error).")
        }
        self.store = store
        self.socketPath = socketPath
        self.configuration = configuration
    }

    /// Serves connections until ``stop()``, then reboots the device and removes the socket.
    public func run() {
        Thread.detachNewThread { [self] in autoLockLoop() }
        while !state.withLock({ $0.stopping }) {
            // At the limit, accept nothing: the next connections wait in the listen queue.
            if state.withLock({ $0.connections.count >= configuration.maximumConnections }) {
                Thread.sleep(forTimeInterval: 0.01)
                continue
            }
            let connection: UnixSocket
            do {
                connection = try listener.accept()
            } catch {
                if state.withLock({ $0.stopping }) { break }
                if error.errno == EMFILE || error.errno == ENFILE {
                    logger.warning("agent: out of descriptors, connections wait", metadata: ["errno": "\(error.errno)"])
                    Thread.sleep(forTimeInterval: 0.05)
                }
                continue
            }
            let admitted = state.withLock { state in
                guard !state.stopping else { return false }
                state.connections[ObjectIdentifier(connection)] = connection
                return true
            }
            guard admitted else {
                connection.close()
                continue
            }
            Thread.detachNewThread { [self] in
                AgentSession(server: self, socket: connection).serve()
                let empty = state.withLock { state in
                    state.connections.removeValue(forKey: ObjectIdentifier(connection))
                    return state.stopping && state.connections.isEmpty
                }
                connection.close()
                if empty { finished.signal() }
            }
        }
        shutDown()
    }

    /// The connections being served now.
    public var connectionCount: Int { state.withLock { $0.connections.count } }

    /// Ends ``run()``: no new connections; the open ones end after their current request.
    public func stop() {
        let connections = state.withLock { state in
            guard !state.stopping else { return [UnixSocket]() }
            state.stopping = true
            return Array(state.connections.values) + Array(state.dataChannels.values)
        }
        listener.shutdown()
        for connection in connections { connection.shutdown() }
    }

    /// After the accept loop: waits for the sessions (each closes its handles), then reboots.
    private func shutDown() {
        let waiting = state.withLock { !$0.connections.isEmpty }
        if waiting { _ = finished.wait(timeout: .now() + 30) }
        listener.close()
        do {
            try store.device.reboot()
        } catch {
            logger.error("agent: reboot at stop failed", metadata: ["error": "\(error)"])
        }
        // Last: the socket's going tells a waiting `dpctl agent stop` that the reboot is done.
        unlink(socketPath)
    }

    // MARK: - Activity and auto-lock

    /// Records a client request (auto-lock counts from the last one).
    func noteActivity() {
        state.withLock { $0.lastActivity = .now }
    }

    /// Runs `body` with `channel` registered: ``stop()`` shuts it down (at once if it has begun).
    func tracking<R, E: Error>(_ channel: UnixSocket, _ body: () throws(E) -> R) throws(E) -> R {
        let stopping = state.withLock { state in
            state.dataChannels[ObjectIdentifier(channel)] = channel
            return state.stopping
        }
        if stopping { channel.shutdown() }
        defer { state.withLock { _ = $0.dataChannels.removeValue(forKey: ObjectIdentifier(channel)) } }
        return try body()
    }

    /// How long until auto-lock, while unlocked.
    func autoLockRemaining() -> Duration? {
        guard let autoLock = configuration.autoLock, store.device.state == .unlocked else { return nil }
        let idle = ContinuousClock.now - state.withLock { $0.lastActivity }
        return max(.zero, autoLock - idle)
    }

    private func autoLockLoop() {
        guard let autoLock = configuration.autoLock else { return }
        while true {
            let (stopping, last) = state.withLock { ($0.stopping, $0.lastActivity) }
            if stopping { return }
            let idle = ContinuousClock.now - last
            if idle >= autoLock {
                if store.device.state == .unlocked {
                    logger.info("agent: auto-lock after \(autoLock) idle")
                    store.device.lock()
                }
                // Counting starts again from the next request.
                Thread.sleep(forTimeInterval: min(0.25, Self.seconds(autoLock)))
            } else {
                Thread.sleep(forTimeInterval: min(0.25, Self.seconds(autoLock - idle)))
            }
        }
    }

    static func seconds(_ duration: Duration) -> Double {
        let (seconds, attoseconds) = duration.components
        return Double(seconds) + Double(attoseconds) / 1e18
    }
}
