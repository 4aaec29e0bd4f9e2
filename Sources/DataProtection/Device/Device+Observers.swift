import Foundation
import SodiumBridge

/// A registration of a synchronous observer. The observer stays registered until
/// ``cancel()``, whether or not the token is kept (as with `NotificationCenter`).
public final class DeviceObservation: Sendable {
    private let onCancel: Locked<(@Sendable () -> Void)?>

    init(onCancel: @escaping @Sendable () -> Void) {
        self.onCancel = Locked(onCancel)
    }

    /// Stops the observation (once; later calls do nothing).
    public func cancel() {
        onCancel.withLock { action in
            action?()
            action = nil
        }
    }
}

/// Observes the device's key lifecycle: what the store needs to flush and
/// wipe handles before keys go. Held weakly.
package protocol DeviceLifecycleObserver: AnyObject, Sendable {
    /// The keys of `classes` are about to be discarded; they are still present.
    func deviceWillDiscardKeys(of classes: Set<ProtectionClass>)
    /// The device restarts; flush (if `flushing`) and close every handle.
    func deviceWillRestart(flushing: Bool)
    /// The device is about to be erased.
    func deviceWillErase()
    /// The device was erased and is fresh again (new keys).
    func deviceDidErase()
    /// The passcode is about to be removed (the old one was verified; the device is unlocked):
    /// whatever exists only while a passcode is set goes now.
    func deviceWillRemovePasscode()
}

struct Subscribers: Sendable {
    var nextID: UInt64 = 0
    var observers: [UInt64: @Sendable (DeviceNotification) -> Void] = [:]
    var streams: [UInt64: AsyncStream<DeviceNotification>.Continuation] = [:]
    var lifecycle: [UInt64: WeakLifecycleObserver] = [:]

    mutating func nextIdentifier() -> UInt64 {
        defer { nextID += 1 }
        return nextID
    }
}

struct WeakLifecycleObserver: Sendable {
    weak var observer: (any DeviceLifecycleObserver)?
    /// Called before the others (see ``Device/addLifecycleObserver(_:first:)``).
    var first = false
}

extension Device {
    /// Calls `handler` synchronously, on the thread that changes the state, for
    /// every notification, until the returned token's ``DeviceObservation/cancel()``
    /// (dropping the token does not stop it: `_ = device.addObserver { … }` observes for
    /// the device's lifetime). ``DeviceNotification/protectedDataWillBecomeUnavailable``
    /// handlers run before any key is discarded, so they can still save protected data.
    @discardableResult
    public func addObserver(_ handler: @escaping @Sendable (DeviceNotification) -> Void) -> DeviceObservation {
        let id = subscribers.withLock { subscribers in
            let id = subscribers.nextIdentifier()
            subscribers.observers[id] = handler
            return id
        }
        return DeviceObservation { [weak self] in
            _ = self?.subscribers.withLock { $0.observers.removeValue(forKey: id) }
        }
    }

    /// The notifications posted from now on, as an asynchronous sequence.
    public func notifications() -> AsyncStream<DeviceNotification> {
        let (stream, continuation) = AsyncStream<DeviceNotification>.makeStream()
        let id = subscribers.withLock { subscribers in
            let id = subscribers.nextIdentifier()
            subscribers.streams[id] = continuation
            return id
        }
        continuation.onTermination = { [weak self] _ in
            _ = self?.subscribers.withLock { $0.streams.removeValue(forKey: id) }
        }
        return stream
    }

    /// Registers a lifecycle observer (held weakly). Observers are called in the order they
    /// were registered, those registered `first` before all others: a database connection
    /// rolls back its transaction while the store's files can still be written, before the
    /// store flushes them and wipes their keys.
    package func addLifecycleObserver(_ observer: any DeviceLifecycleObserver, first: Bool = false) {
        subscribers.withLock { subscribers in
            subscribers.lifecycle[subscribers.nextIdentifier()] = WeakLifecycleObserver(observer: observer, first: first)
        }
    }

    func lifecycleObservers() -> [any DeviceLifecycleObserver] {
        subscribers.withLock { subscribers in
            subscribers.lifecycle = subscribers.lifecycle.filter { $0.value.observer != nil }
            return subscribers.lifecycle.sorted { ($0.value.first ? 0 : 1, $0.key) < ($1.value.first ? 0 : 1, $1.key) }
                .compactMap(\.value.observer)
        }
    }

    /// Posts `notification`: synchronous observers first (in registration order), then streams.
    func post(_ notification: DeviceNotification) {
        let (observers, streams) = subscribers.withLock { subscribers in
            (subscribers.observers.sorted { $0.key < $1.key }.map(\.value), Array(subscribers.streams.values))
        }
        for observer in observers { observer(notification) }
        for stream in streams { stream.yield(notification) }
    }
}

extension DeviceLifecycleObserver {
    /// Default: nothing to do after an erase.
    package func deviceDidErase() {}
    /// Default: nothing bound to the passcode.
    package func deviceWillRemovePasscode() {}
}
