import DBusBridge
import DataProtection
import Foundation
import SodiumBridge

/// The prompt an `Unlock` of locked objects returns. There is no user interface here: running
/// it (`Prompt`) waits for the device to be unlocked (`dpctl unlock`), then emits `Completed`
/// with the objects unlocked; `Dismiss`, or no unlock within the timeout, emits `Completed`
/// dismissed.
final class SecretServicePrompt: Sendable {
    /// What a client is told to do (also the error message of a locked object).
    static let instruction = "The device is locked: run `dpctl unlock` to unlock it."

    let path: String
    private let objects: [String]
    private let timeout: Duration
    private let device: Device
    private let connection: DBusConnection
    private let state = Locked<(started: Bool, done: Bool, observation: DeviceObservation?)>((false, false, nil))
    private let onEnd: @Sendable () -> Void

    init(path: String, objects: [String], device: Device, connection: DBusConnection, timeout: Duration, onEnd: @escaping @Sendable () -> Void) {
        self.path = path
        self.objects = objects
        self.device = device
        self.connection = connection
        self.timeout = timeout
        self.onEnd = onEnd
    }

    /// Answers a call to the prompt object (`Prompt`, `Dismiss`); `false` for other members.
    func handle(_ message: DBusMessage) throws(DBusError) -> Bool {
        switch message.member {
        case "Prompt":
            try message.reply()
            start()
            return true
        case "Dismiss":
            try message.reply()
            finish(dismissed: true)
            return true
        default:
            return false
        }
    }

    /// Waits for the unlock (once), or completes at once when the device is unlocked already.
    private func start() {
        let first = state.withLock { state in
            defer { state.started = true }
            return !state.started
        }
        guard first else { return }
        let observation = device.addObserver { [weak self] notification in
            guard notification == .protectedDataDidBecomeAvailable, let self else { return }
            DispatchQueue.global().async { self.finish(dismissed: false) }
        }
        state.withLock { $0.observation = observation }
        if device.isProtectedDataAvailable {
            finish(dismissed: false)
            return
        }
        let (seconds, attoseconds) = timeout.components
        DispatchQueue.global().asyncAfter(deadline: .now() + Double(seconds) + Double(attoseconds) / 1e18) { [weak self] in
            self?.finish(dismissed: true)
        }
    }

    /// Emits `Completed` once.
    private func finish(dismissed: Bool) {
        let observation = state.withLock { state -> DeviceObservation?? in
            guard !state.done else { return .none }
            state.done = true
            defer { state.observation = nil }
            return .some(state.observation)
        }
        guard case .some(let watched) = observation else { return }
        watched?.cancel()
        let result = DBusValue.variant(.objectPaths(dismissed ? [] : objects))
        try? connection.emitSignal(path: path, interface: "org.freedesktop.Secret.Prompt", member: "Completed", [.boolean(dismissed), result])
        onEnd()
    }
}
