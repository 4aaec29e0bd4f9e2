import DBusBridge
import DataProtection
import DataProtectionSQLite
import Foundation
import Logging
import SodiumBridge

/// A freedesktop Secret Service (`org.freedesktop.secrets`) over a store's keychain, for
/// libsecret, `secret-tool`, python-secretstorage and every other client of the API.
///
/// The store's keychain is one collection (`/org/freedesktop/secrets/collection/keychain`, the
/// `default` alias). Every item of the keychain is an item of it, with its true locked state
/// (from its accessibility); items created by Secret Service clients are
/// `whenUnlocked`. Items of a locked class cannot be listed (their
/// attributes are encrypted under the class key): a search does not return them. Sessions:
/// `plain` and `dh-ietf1024-sha256-aes128-cbc-pkcs7`. `Unlock` of a locked object returns a
/// prompt that completes when the device is unlocked (`dpctl unlock`), or is dismissed after
/// ``promptTimeout``; `Lock` locks the device. See `Docs/Items.md`, "Secret Service".
public final class SecretServiceProvider: Sendable {
    /// The well-known bus name of the Secret Service.
    public static let busName = "org.freedesktop.secrets"
    /// The service object.
    static let servicePath = "/org/freedesktop/secrets"
    /// The store's one collection.
    static let collectionPath = "/org/freedesktop/secrets/collection/keychain"
    /// The `default` alias, which libsecret addresses the collection by.
    static let defaultAliasPath = "/org/freedesktop/secrets/aliases/default"

    /// The keychain served.
    public let keychain: Keychain
    /// How long a prompt waits for the unlock before it is dismissed.
    public let promptTimeout: Duration
    let connection: DBusConnection
    let logger = Logger(label: "DataProtection.secret-service")

    struct State {
        var sessions: [String: SecretServiceSession] = [:]
        var prompts: [String: SecretServicePrompt] = [:]
        var nextObject: UInt64 = 0
        /// The accessibility of every item seen, by identifier (not secret: it tells a locked
        /// item's class when its database cannot be read).
        var accessibilities: [String: ItemAccessibility] = [:]
        var registration: DBusRegistration?
        var observation: DeviceObservation?
        /// Called at every method call of a client (the agent's idle timer counts it as activity).
        var whenCalled: (@Sendable () -> Void)?
        /// What the change signals last told of each readable item (SecretServiceProvider+Changes).
        var announced: [String: Announced] = [:]
        /// The task that follows the keychain's changes.
        var following: Task<Void, Never>?
        /// The agent's gate for changes of the store (agent-side backups wait for none running).
        var storeGate: AgentStoreGate?
    }
    let state = Locked(State())
    /// Makes a change and its signals one step against the comparison that finds other changes.
    let announceLock = NSLock()

    /// Connects to the session bus (`busAddress`, else `$DBUS_SESSION_BUS_ADDRESS`), takes
    /// `org.freedesktop.secrets` and serves `keychain` on it until ``stop()``.
    ///
    /// - Throws: `storeBusy` naming the owner when another process owns the name;
    ///   `ioFailure` when the bus cannot be reached.
    public init(keychain: Keychain, busAddress: String? = nil, promptTimeout: Duration = .seconds(300)) throws(DataProtectionError) {
        self.keychain = keychain
        self.promptTimeout = promptTimeout
        do {
            connection = try DBusConnection(busAddress.map(DBusConnection.Bus.address) ?? .session)
        } catch {
            throw DataProtectionError(.ioFailure, "The Secret Service cannot reach the session bus: \(error.message)",
                                      hint: "Set DBUS_SESSION_BUS_ADDRESS, or start the agent inside a desktop session.")
        }
        do {
            let registration = try connection.exportObject(at: Self.servicePath, fallback: true) { [weak self] message throws(DBusError) in
                guard let self else { return false }
                return try self.handle(message)
            }
            state.withLock { $0.registration = registration }
            switch try connection.requestName(Self.busName) {
            case .primaryOwner, .alreadyOwner:
                break
            case .queued, .taken:
                let owner = (try? connection.owner(of: Self.busName)) ?? nil
                let description = owner.map { Self.describeOwner($0, on: connection) } ?? "another process"
                connection.close()
                throw DataProtectionError(.storeBusy, "\(Self.busName) is owned by \(description) on the session bus.",
                                          hint: "Stop the other Secret Service (gnome-keyring-daemon, KeePassXC, …) first.")
            }
        } catch let error as DataProtectionError {
            throw error
        } catch {
            connection.close()
            throw DataProtectionError(.ioFailure, "The Secret Service cannot be served: \(error).")
        }
        let observation = keychain.store.device.addObserver { [weak self] notification in
            guard notification == .protectedDataDidBecomeAvailable || notification == .protectedDataWillBecomeUnavailable, let self else { return }
            DispatchQueue.global().async { self.announceLockState() }
        }
        state.withLock { $0.observation = observation }
        followChanges()
    }

    /// Gives up the name and leaves the bus; sessions' keys are wiped.
    public func stop() {
        let (sessions, registration, observation, following) = state.withLock { state in
            defer {
                state.sessions = [:]
                state.prompts = [:]
                state.registration = nil
                state.observation = nil
                state.following = nil
            }
            return (Array(state.sessions.values), state.registration, state.observation, state.following)
        }
        following?.cancel()
        observation?.cancel()
        for session in sessions { session.close() }
        registration?.cancel()
        try? connection.releaseName(Self.busName)
        connection.close()
    }

    /// The owner's unique name with its process, as the bus tells (`:1.4 (pid 812, gnome-keyring-d)`).
    static func describeOwner(_ owner: String, on connection: DBusConnection) -> String {
        guard let reply = try? connection.call("org.freedesktop.DBus", path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus",
                                               member: "GetConnectionUnixProcessID", [.string(owner)]),
              let pid = reply.first?.integerValue else { return owner }
        let command = (try? String(contentsOfFile: "/proc/\(pid)/comm", encoding: .utf8))?.trimmingCharacters(in: .whitespacesAndNewlines)
        return "\(owner) (pid \(pid)\(command.map { ", \($0)" } ?? ""))"
    }

    /// A new object path under `kind` (`session`, `prompt`).
    func newObjectPath(_ kind: String) -> String {
        state.withLock { state in
            state.nextObject += 1
            return "\(Self.servicePath)/\(kind)/\(kind.prefix(1))\(state.nextObject)"
        }
    }

    /// Tells clients the collection's and the known items' `Locked` after a lock or an unlock.
    private func announceLockState() {
        let device = keychain.store.device
        try? connection.emitPropertiesChanged(path: Self.collectionPath, interface: "org.freedesktop.Secret.Collection",
                                              changed: ["Locked": .boolean(collectionLocked)])
        let known = state.withLock { $0.accessibilities }
        for (id, accessibility) in known {
            try? connection.emitPropertiesChanged(path: Self.itemPath(id), interface: "org.freedesktop.Secret.Item",
                                                  changed: ["Locked": .boolean(!device.isAvailable(accessibility.protectionClass))])
        }
    }

    /// Whether the collection is locked: the class of the items Secret Service clients create is unavailable.
    var collectionLocked: Bool { !keychain.store.device.isAvailable(ItemAccessibility.whenUnlocked.protectionClass) }

    static func itemPath(_ id: String) -> String { "\(collectionPath)/\(id)" }

    /// The item identifier of an item path (under the collection or the alias), `nil` for other paths.
    static func itemIdentifier(_ path: String) -> String? {
        for prefix in [collectionPath + "/", defaultAliasPath + "/"] where path.hasPrefix(prefix) {
            let id = String(path.dropFirst(prefix.count))
            return id.isEmpty || id.contains("/") ? nil : id
        }
        return nil
    }

    /// A Secret Service error for a keychain failure.
    static func busError(_ error: DataProtectionError) -> DBusError {
        switch error.code {
        case .protectedDataUnavailable: DBusError(name: "org.freedesktop.Secret.Error.IsLocked", message: "\(error.message) \(SecretServicePrompt.instruction)")
        case .fileNotFound: DBusError(name: "org.freedesktop.Secret.Error.NoSuchObject", message: error.message)
        default: DBusError(name: "org.freedesktop.DBus.Error.Failed", message: error.description)
        }
    }

    /// Calls `handler` at every method call a client makes: a Secret Service client's use is
    /// activity for the agent's auto-lock, as a request on its socket is.
    package func whenCalled(_ handler: @escaping @Sendable () -> Void) {
        state.withLock { $0.whenCalled = handler }
    }

    static let noSuchObject = DBusError(name: "org.freedesktop.Secret.Error.NoSuchObject", message: "No such object.")
}

extension AgentServer {
    /// The Secret Service `configuration` asks for (`nil`: not asked).
    static func startSecretService(_ store: ProtectedStore, _ configuration: Configuration) throws(DataProtectionError) -> SecretServiceProvider? {
        guard configuration.servesSecretService else { return nil }
        return try SecretServiceProvider(keychain: store.keychain, busAddress: configuration.sessionBusAddress)
    }

    /// Starts the Secret Service `configuration` asks for, its changes inside the agent's
    /// store gate (an agent-side backup holds the store at one instant, items included).
    static func startSecretService(_ store: ProtectedStore, _ configuration: Configuration, gate: AgentStoreGate) throws(DataProtectionError) -> SecretServiceProvider? {
        let provider = try Self.startSecretService(store, configuration)
        provider?.state.withLock { $0.storeGate = gate }
        return provider
    }
}
