import DataProtection
import Foundation
import Synchronization

/// The device of an agent, seen from a client: the surface of `Device` (state,
/// passcode, lock and unlock, notifications), carried out inside the agent.
public final class AgentDevice: DeviceControlling {
    let connection: AgentConnection

    init(connection: AgentConnection) {
        self.connection = connection
    }

    private func status() throws(DataProtectionError) -> AgentStatus {
        try AgentStore.decode(try connection.call(.status), AgentStatus.decode)
    }

    /// The agent's lock state.
    public var state: DeviceState {
        get throws(DataProtectionError) { try status().state }
    }

    /// Whether a passcode is set.
    public var hasPasscode: Bool {
        get throws(DataProtectionError) { try status().passcodeSet }
    }

    /// The consecutive failed passcode attempts.
    public var failedPasscodeAttempts: Int {
        get throws(DataProtectionError) { try status().failedPasscodeAttempts }
    }

    /// Whether protected data (class `complete`) is available.
    public var isProtectedDataAvailable: Bool {
        get throws(DataProtectionError) { try isAvailable(.complete) }
    }

    /// Whether an existing, closed file of `protectionClass` can be opened now.
    public func isAvailable(_ protectionClass: ProtectionClass) throws(DataProtectionError) -> Bool {
        try status().availableClasses.contains(protectionClass)
    }

    /// Unlocks the agent's device with `passcode` (`nil`: a bare unlock); a counted attempt.
    public func unlock(passcode: Passcode? = nil) throws(DataProtectionError) {
        try empty(.unlock(passcode: passcode))
    }

    /// Locks the agent's device.
    public func lock() throws(DataProtectionError) {
        try empty(.lock)
    }

    /// Sets a passcode where there is none.
    public func setPasscode(_ newPasscode: Passcode) throws(DataProtectionError) {
        try empty(.setPasscode(newPasscode))
    }

    /// Changes the passcode.
    public func changePasscode(from oldPasscode: Passcode, to newPasscode: Passcode) throws(DataProtectionError) {
        try empty(.changePasscode(from: oldPasscode, to: newPasscode))
    }

    /// Removes the passcode.
    public func removePasscode(_ oldPasscode: Passcode) throws(DataProtectionError) {
        try empty(.removePasscode(oldPasscode))
    }

    /// Erases the agent's device: every file becomes unrecoverable.
    public func erase() throws(DataProtectionError) {
        try empty(.erase)
    }

    /// Calls `body` with every notification the agent posts from now on, on this thread,
    /// until `body` returns `false` or the agent goes away. A connection of its own carries
    /// the events. `ready` runs once the agent is watching (nothing posted after it is missed).
    public func watch(ready: () -> Void = {}, _ body: (AgentEvent) -> Bool) throws(DataProtectionError) {
        try watchAll(ready: ready) { event in
            guard case .device(let event) = event else { return true }  // a session event: not asked for
            return body(event)
        }
    }

    /// Calls `body` with every notification of the device and every change of the login
    /// session the agent follows (``AgentSessionEvent``), as ``watch(ready:_:)`` does.
    public func watchAll(ready: () -> Void = {}, _ body: (AgentWatchEvent) -> Bool) throws(DataProtectionError) {
        let watcher = try AgentConnection(socketPath: connection.socketPath)
        defer { watcher.close() }
        let channel = try watcher.startWatching()
        ready()
        while let (payload, descriptor) = try? channel.receive() {
            try? descriptor?.close()
            switch try? AgentResponse.decode(payload) {
            case .event(let event): guard body(.device(event)) else { return }
            case .sessionEvent(let event): guard body(.session(event)) else { return }
            default: return
            }
        }
    }

    /// The notifications the agent posts from now on, with when it posted them (each
    /// stream has a connection of its own, closed when the stream ends).
    ///
    /// - Throws: when no agent answers (the stream never starts).
    public func events() throws(DataProtectionError) -> AsyncStream<AgentEvent> {
        let watcher = try AgentConnection(socketPath: connection.socketPath)
        let channel = try watcher.startWatching()
        let (stream, continuation) = AsyncStream<AgentEvent>.makeStream()
        continuation.onTermination = { _ in channel.socket.shutdown() }
        Thread.detachNewThread {
            defer {
                continuation.finish()
                watcher.close()
            }
            while let (payload, descriptor) = try? channel.receive() {
                try? descriptor?.close()
                switch try? AgentResponse.decode(payload) {
                case .event(let event): continuation.yield(event)
                case .sessionEvent: continue
                default: return
                }
            }
        }
        return stream
    }

    /// The notifications the agent posts from now on (an empty stream if no agent answers).
    public func notifications() -> AsyncStream<DeviceNotification> {
        guard let events = try? events() else { return AsyncStream { $0.finish() } }
        return AsyncStream { continuation in
            let task = Task {
                for await event in events { continuation.yield(event.notification) }
                continuation.finish()
            }
            continuation.onTermination = { _ in task.cancel() }
        }
    }

    private func empty(_ request: AgentRequest) throws(DataProtectionError) {
        try AgentStore.decode(try connection.call(request), AgentReply.empty)
    }
}
