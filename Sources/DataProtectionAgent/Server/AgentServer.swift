import DBusBridge
import DataProtection
import DataProtectionSQLite
import Foundation
import SodiumBridge
import Logging
import SocketBridge

/// The agent: one process that owns a store and serves it to other processes of the
/// same user over a Unix-domain socket (`Keys/agent-protocol.md`).
///
/// Each connection gets a thread, once its peer is known to be of this user (others are
/// refused at accept, before any thread or buffer is spent on them). A connection has
/// ``Configuration/helloTimeout`` to send its hello or is closed; when the connections are at
/// their limit, the oldest one still without its hello makes room for a new one. Every request is carried out on the agent's own
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
        /// The most connections of one user served at once: this agent's user's (others are
        /// refused at once, and hold none). Beyond it, the oldest connection still waiting for
        /// its hello is closed to make room; if every one has said hello, the next connections
        /// wait in the listen queue. Lowered when the descriptor limit leaves less room.
        public var maximumConnections: Int
        /// How long a new connection may take to send its hello before it is closed.
        public var helloTimeout: Duration
        /// Whether the agent locks its device with the login session (``SessionFollowing``).
        public var sessionFollowing: SessionFollowing
        /// The system bus's address for logind (`nil`: `$DBUS_SYSTEM_BUS_ADDRESS`, else the
        /// standard socket).
        public var systemBusAddress: String?
        /// The session bus's address for the screensavers (`nil`: `$DBUS_SESSION_BUS_ADDRESS`,
        /// else `$XDG_RUNTIME_DIR/bus`).
        public var sessionBusAddress: String?
        /// The logind session followed (`nil`: `$XDG_SESSION_ID`, else logind's session of this process).
        public var loginSessionIdentifier: String?
        /// Whether to tell a service manager (`$NOTIFY_SOCKET`, `Type=notify` units) that the agent
        /// is ready (`READY=1`), its lock state (`STATUS=`) and that it stops (`STOPPING=1`).
        public var notifiesServiceManager: Bool
        /// Whether to serve the store's keychain as the freedesktop Secret Service
        /// (`org.freedesktop.secrets`) on the session bus (``sessionBusAddress``), beside the
        /// socket: ``SecretServiceProvider``. Starting fails (`storeBusy`, naming it) when
        /// another process owns the name, `ioFailure` without a session bus.
        public var servesSecretService: Bool

        /// The agent's rules: auto-lock after `autoLock` idle (`nil`: never), at most
        /// `maximumConnections` served at once, each to send its hello within `helloTimeout`;
        /// the login session followed as `sessionFollowing` says; the service manager told of
        /// readiness and state when `notifiesServiceManager`; the keychain served as the Secret
        /// Service when `servesSecretService`.
        public init(autoLock: Duration? = .seconds(300), maximumConnections: Int = 1024, helloTimeout: Duration = .seconds(5),
                    sessionFollowing: SessionFollowing = .never, notifiesServiceManager: Bool = false, servesSecretService: Bool = false) {
            self.autoLock = autoLock
            self.maximumConnections = maximumConnections
            self.helloTimeout = helloTimeout
            self.sessionFollowing = sessionFollowing
            self.notifiesServiceManager = notifiesServiceManager
            self.servesSecretService = servesSecretService
        }
    }

    /// Whether an agent locks its device with the user's login session
    /// (`semantics.md`, "Processes and the agent").
    public enum SessionFollowing: Sendable, Hashable {
        /// Only `lock`, the auto-lock and the API lock the device.
        case never
        /// Follow what is reachable (logind on the system bus, the screensavers on the session
        /// bus); without either, serve as with ``never``.
        case whenAvailable
        /// As ``whenAvailable``, but starting fails (`ioFailure`) when nothing can be followed.
        case required
    }

    /// The store served.
    public let store: ProtectedStore
    /// The store's keychain, held for the agent's life (its generation counts every change the agent serves).
    let keychain: Keychain
    /// Holds the store's changes while an agent-side backup takes its one instant.
    let storeGate = AgentStoreGate()
    /// Where the agent listens.
    public let socketPath: String
    /// Whether the listening socket was inherited (socket activation): it is then not
    /// removed at stop, it belongs to whoever made it.
    public let isSocketInherited: Bool
    /// How it behaves.
    public let configuration: Configuration

    let logger = Logger(label: "DataProtection.agent")
    private let listener: UnixSocket
    /// The login session followed (`nil`: ``SessionFollowing/never``).
    let sessionFollower: LoginSessionFollower?
    /// Where session events go: the watching connections.
    let sessionEvents: AgentSessionEventRelay
    /// The Secret Service served on the session bus (``Configuration/servesSecretService``).
    public let secretService: SecretServiceProvider?
    private let state = Locked(State())
    private let finished = DispatchSemaphore(value: 0)

    struct State {
        var lastActivity = ContinuousClock.now
        var connections: [ObjectIdentifier: Connection] = [:]
        /// Data channels in use (a `sqlStream`'s socket): stopping shuts them down too, so that
        /// a request blocked on a client that neither sends nor reads ends at once.
        var dataChannels: [ObjectIdentifier: UnixSocket] = [:]
        var stopping = false
        /// Connections admitted in order, for the oldest one without its hello.
        var admissions = 0
    }

    /// A connection being served.
    struct Connection {
        let socket: UnixSocket
        /// Its place in the order of admission.
        let order: Int
        /// When it was admitted.
        let admitted = ContinuousClock.now
        /// Whether its hello was answered.
        var greeted = false
        /// Whether it was closed to make room (its thread is ending).
        var evicted = false
    }

    /// Starts listening at `socketPath` for `store` (served once ``run(whenReady:)`` is called).
    ///
    /// A socket file left by an agent that died is replaced; a live agent at the path is
    /// `DataProtectionError/Code/storeBusy`.
    public init(store: ProtectedStore, socketPath: String, configuration: Configuration = Configuration()) throws(DataProtectionError) {
        let relay = AgentSessionEventRelay()
        let follower = try Self.followSession(store.device, configuration, relay: relay)
        do throws(DataProtectionError) {
            try AgentSocketLocation.prepareDirectory(of: socketPath)
            if let live = try? UnixSocket.connect(to: socketPath, within: 2000) {
                live.close()
                throw DataProtectionError(.storeBusy, "An agent already listens at \(socketPath).", hint: "Stop it first: `dpctl agent stop`.")
            }
            unlink(socketPath)
            do {
                listener = try UnixSocket.listen(at: socketPath)
            } catch {
                throw DataProtectionError(.ioFailure, "The agent cannot listen: \(error).")
            }
        } catch {
            follower?.stop()
            throw error
        }
        do {
            secretService = try Self.startSecretService(store, configuration, gate: storeGate)
        } catch {
            follower?.stop()
            listener.close()
            unlink(socketPath)
            throw error
        }
        sessionFollower = follower
        sessionEvents = relay
        self.store = store
        keychain = store.keychain
        self.socketPath = socketPath
        self.configuration = configuration
        isSocketInherited = false
        secretService?.whenCalled { [weak self] in self?.noteActivity() }
    }

    /// Serves `store` on a listening socket this process inherited (socket activation, as
    /// systemd's `LISTEN_FDS` hands it over: see ``inheritedListeningDescriptor(environment:)``).
    /// Nothing is bound and nothing connects to the socket; it is left in place at stop.
    ///
    /// - Throws: `invalidArgument` when `descriptor` is not a listening Unix-domain stream socket.
    public init(store: ProtectedStore, listeningDescriptor descriptor: Int32, configuration: Configuration = Configuration())
        throws(DataProtectionError) {
        let relay = AgentSessionEventRelay()
        let follower = try Self.followSession(store.device, configuration, relay: relay)
        do {
            let (socket, path) = try UnixSocket.inheritedListener(descriptor)
            listener = socket
            socketPath = path.isEmpty ? "descriptor \(descriptor)" : path
        } catch {
            follower?.stop()
            throw DataProtectionError(.invalidArgument, "The agent cannot serve on \(error).",
                                      hint: "Socket activation hands over one listening Unix-domain stream socket (ListenStream= in a .socket unit).")
        }
        do {
            secretService = try Self.startSecretService(store, configuration, gate: storeGate)
        } catch {
            follower?.stop()
            throw error
        }
        self.store = store
        keychain = store.keychain
        self.configuration = configuration
        isSocketInherited = true
        sessionFollower = follower
        sessionEvents = relay
        secretService?.whenCalled { [weak self] in self?.noteActivity() }
    }

    /// The listening socket handed over by socket activation, if any: systemd's protocol
    /// (`sd_listen_fds(3)`), descriptor 3 when `LISTEN_PID` is this process and `LISTEN_FDS`
    /// at least 1. The variables are removed from the environment (no child inherits them).
    public static func inheritedListeningDescriptor(environment: [String: String] = ProcessInfo.processInfo.environment) -> Int32? {
        defer {
            for name in ["LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES"] { unsetenv(name) }
        }
        guard let pid = environment["LISTEN_PID"].flatMap({ Int32($0) }), pid == getpid(),
              let count = environment["LISTEN_FDS"].flatMap({ Int($0) }), count >= 1 else { return nil }
        return 3
    }

    /// Serves connections until ``stop()``, then reboots the device and removes the socket.
    ///
    /// First raises the soft descriptor limit to the hard one (each connection is a descriptor).
    /// `whenReady` runs once the agent serves (connections are accepted from then on); with
    /// ``Configuration/notifiesServiceManager``, the service manager hears `READY=1` then too.
    public func run(whenReady: () -> Void = {}) {
        AgentSocketRecord.write(socketPath: socketPath, in: store.device.directory)
        let descriptors = (try? DescriptorLimit.raiseToHardLimit()) ?? 1024
        // Room for every connection, its data channel and a descriptor it passes, and the store's own.
        let limit = max(1, min(configuration.maximumConnections, (descriptors - 64) / 3))
        Thread.detachNewThread { [self] in autoLockLoop() }
        let stateReports = configuration.notifiesServiceManager ? reportStateToServiceManager() : nil
        defer { stateReports?.cancel() }
        whenReady()
        while !state.withLock({ $0.stopping }) {
            // At the limit, make room by closing the oldest connection still without its hello;
            // if every one has said hello, accept nothing: the next connections wait in the listen queue.
            guard makeRoom(limit: limit) else {
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
                    _ = evictOldestWithoutHello()
                    Thread.sleep(forTimeInterval: 0.05)
                }
                continue
            }
            // Another user's connection is refused here, before a thread or a buffer is spent on it.
            guard let peer = try? connection.peerCredentials() else {
                connection.close()
                continue
            }
            guard peer.uid == getuid() else {
                logger.warning("agent: refused a connection from another user", metadata: ["uid": "\(peer.uid)", "pid": "\(peer.pid)"])
                AgentSession.refuse(connection, DataProtectionError(
                    .notPermitted, "The agent serves only user \(getuid()); this process runs as user \(peer.uid)."))
                connection.close()
                continue
            }
            let admitted = state.withLock { state in
                guard !state.stopping else { return false }
                state.admissions += 1
                state.connections[ObjectIdentifier(connection)] = Connection(socket: connection, order: state.admissions)
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

    /// Whether there is room for one more connection under `limit`; when there is not and a
    /// connection waits in the listen queue, makes room by closing the oldest one without its
    /// hello (if it has had a second to send it).
    private func makeRoom(limit: Int) -> Bool {
        let full = state.withLock { state in state.connections.values.count { !$0.evicted } >= limit }
        guard full else { return true }
        guard (try? listener.waitUntilReadable(milliseconds: 0)) == true else { return false }
        return evictOldestWithoutHello(admittedBefore: .now - Self.evictionAge)
    }

    /// How long a connection is left to send its hello before it may make room for another.
    static let evictionAge = Duration.seconds(1)

    /// Shuts down the oldest connection that has not said hello yet, if it was admitted
    /// before `time`; `false` if there is none.
    private func evictOldestWithoutHello(admittedBefore time: ContinuousClock.Instant = .now) -> Bool {
        let evicted = state.withLock { state -> UnixSocket? in
            guard let (key, oldest) = state.connections.filter({ !$0.value.greeted && !$0.value.evicted && $0.value.admitted < time })
                .min(by: { $0.value.order < $1.value.order }) else { return nil }
            state.connections[key]?.evicted = true
            return oldest.socket
        }
        guard let evicted else { return false }
        logger.notice("agent: closed a connection without its hello to make room for another")
        evicted.shutdown()
        return true
    }

    /// Records that `socket`'s hello was answered: it is no longer the first to go when room is needed.
    func noteGreeted(_ socket: UnixSocket) {
        state.withLock { $0.connections[ObjectIdentifier(socket)]?.greeted = true }
    }

    /// The connections being served now.
    public var connectionCount: Int { state.withLock { $0.connections.count } }

    /// Ends ``run(whenReady:)``: no new connections; the open ones end after their current request.
    public func stop() {
        let (first, connections) = state.withLock { state in
            guard !state.stopping else { return (false, [UnixSocket]()) }
            state.stopping = true
            return (true, state.connections.values.map(\.socket) + Array(state.dataChannels.values))
        }
        if first && configuration.notifiesServiceManager { ServiceManagerNotification.stopping() }
        listener.shutdown()
        for connection in connections { connection.shutdown() }
    }

    /// After the accept loop: waits for the sessions (each closes its handles), then reboots.
    private func shutDown() {
        let waiting = state.withLock { !$0.connections.isEmpty }
        if waiting { _ = finished.wait(timeout: .now() + 30) }
        listener.close()
        sessionFollower?.stop()
        secretService?.stop()
        do {
            try store.device.reboot()
        } catch {
            logger.error("agent: reboot at stop failed", metadata: ["error": "\(error)"])
        }
        AgentSocketRecord.remove(in: store.device.directory)
        // Last: the socket's going tells a waiting `dpctl agent stop` that the reboot is done.
        // (An inherited socket is its maker's to remove.)
        if !isSocketInherited { unlink(socketPath) }
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
                    do {
                        try store.device.lock()
                    } catch {
                        logger.error("agent: the auto-lock failed: \(error.localizedDescription)")
                    }
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
