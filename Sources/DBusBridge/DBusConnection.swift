import CSystemd
import Foundation
import Synchronization

/// A connection to a D-Bus bus (sd-bus), served by a dispatch thread of its own.
///
/// sd-bus objects are not thread-safe: the connection's thread owns the `sd_bus` and every
/// message and slot of it. Other threads hand their work to it (``perform(_:)``) and wait; the
/// handlers of signals and exported objects run on it, in the order messages arrive, and may
/// call back into the connection (work asked from the owner thread runs at once). A handler
/// must not block for long: the bus waits for it.
///
/// When the bus goes away (the daemon exits, the socket breaks), the thread ends, every
/// ``whenDisconnected(_:)`` handler runs once, and later calls throw ``DBusError/disconnected``.
/// ``close()`` ends the connection on purpose (no disconnection handler runs).
public final class DBusConnection: Sendable {
    /// Which bus to connect to.
    public enum Bus: Sendable, Hashable, CustomStringConvertible {
        /// The system bus: `$DBUS_SYSTEM_BUS_ADDRESS`, else `/run/dbus/system_bus_socket`.
        case system
        /// The user's session bus: `$DBUS_SESSION_BUS_ADDRESS`, else `$XDG_RUNTIME_DIR/bus`.
        case session
        /// The bus at a D-Bus address, e.g. `unix:path=/tmp/bus`.
        case address(String)

        public var description: String {
            switch self {
            case .system: "system bus"
            case .session: "session bus"
            case .address(let address): "bus at \(address)"
            }
        }
    }

    /// The bus connected to.
    public let bus: Bus
    /// This connection's unique name on the bus (`:1.42`).
    public let uniqueName: String

    /// The `sd_bus`, used only on the owner thread (or before it starts / after it ended).
    nonisolated(unsafe) let handle: OpaquePointer
    /// Wakes the owner thread when work is queued (an eventfd).
    private let wakeDescriptor: Int32
    let shared = Mutex(Shared())
    private let ended = DispatchSemaphore(value: 0)
    /// Owner-thread state: the slots this connection holds, by registration number.
    nonisolated(unsafe) private var slots: [UInt64: OpaquePointer] = [:]
    nonisolated(unsafe) private var nextSlot: UInt64 = 0

    struct Shared: ~Copyable {
        var work: [@Sendable (OpaquePointer?) -> Void] = []
        var closing = false
        var disconnected = false
        var ownerThread: pthread_t?
        var disconnectionHandlers: [@Sendable () -> Void] = []

        /// Whether the calling thread is the owner thread.
        var isOwnerThread: Bool {
            guard let ownerThread else { return false }
            return pthread_equal(ownerThread, pthread_self()) != 0
        }
    }

    /// Connects to `bus` and starts the dispatch thread.
    ///
    /// - Throws: when the bus cannot be reached (no daemon, no address, refused).
    public init(_ bus: Bus) throws(DBusError) {
        var handle: OpaquePointer?
        var result: Int32
        switch bus {
        case .system:
            result = sd_bus_open_system(&handle)
        case .session:
            result = sd_bus_open_user(&handle)
        case .address(let address):
            result = sd_bus_new(&handle)
            if result >= 0 { result = sd_bus_set_address(handle, address) }
            if result >= 0 { result = sd_bus_set_bus_client(handle, 1) }
            if result >= 0 { result = sd_bus_start(handle) }
        }
        guard result >= 0, let handle else {
            if let handle { sd_bus_unref(handle) }
            throw DBusError("connecting to the \(bus)", result: result)
        }
        var unique: UnsafePointer<CChar>?
        result = sd_bus_get_unique_name(handle, &unique)
        guard result >= 0, let unique else {
            sd_bus_flush_close_unref(handle)
            throw DBusError("connecting to the \(bus)", result: result)
        }
        let wake = eventfd(0, Int32(EFD_CLOEXEC | EFD_NONBLOCK))
        guard wake >= 0 else {
            sd_bus_flush_close_unref(handle)
            throw DBusError("creating an eventfd", result: -errno)
        }
        self.bus = bus
        self.handle = handle
        self.uniqueName = String(cString: unique)
        self.wakeDescriptor = wake
        let started = DispatchSemaphore(value: 0)
        let thread = Thread { [self] in
            shared.withLock { $0.ownerThread = pthread_self() }
            started.signal()
            loop()
        }
        thread.name = "D-Bus \(bus)"
        thread.start()
        started.wait()
    }

    deinit {
        _ = Glibc.close(wakeDescriptor)
    }

    /// Whether the connection still works (not closed, bus not gone).
    public var isConnected: Bool {
        shared.withLock { !$0.closing && !$0.disconnected }
    }

    /// Runs `handler` once on the owner thread when the bus goes away (at once, on this
    /// thread, if it has gone already). Not after ``close()``.
    public func whenDisconnected(_ handler: @escaping @Sendable () -> Void) {
        let gone = shared.withLock { shared in
            if shared.disconnected { return true }
            shared.disconnectionHandlers.append(handler)
            return false
        }
        if gone { handler() }
    }

    /// Ends the connection: the dispatch thread finishes the work queued, flushes what is to
    /// be sent and closes the bus. Waits for it (at once on the owner thread itself).
    public func close() {
        let (first, onOwner) = shared.withLock { shared in
            defer { shared.closing = true }
            return (!shared.closing, shared.isOwnerThread)
        }
        wakeUp()
        if first && !onOwner { ended.wait() }
    }

    /// Runs `body` with the `sd_bus` on the owner thread and returns what it returns; from the
    /// owner thread itself, at once.
    ///
    /// - Throws: what `body` throws; ``DBusError/disconnected`` when the connection has ended.
    func perform<R: Sendable>(_ body: @escaping @Sendable (OpaquePointer) throws(DBusError) -> R) throws(DBusError) -> R {
        let (onOwner, open) = shared.withLock { shared in
            (shared.isOwnerThread, !shared.closing && !shared.disconnected)
        }
        if onOwner { return try body(handle) }
        guard open else { throw .disconnected }
        let result = Mutex<Result<R, DBusError>>(.failure(.disconnected))
        let done = DispatchSemaphore(value: 0)
        let queued = shared.withLock { shared in
            guard !shared.closing && !shared.disconnected else { return false }
            shared.work.append { handle in
                if let handle {
                    let outcome = Result { () throws(DBusError) -> R in try body(handle) }
                    result.withLock { $0 = outcome }
                }
                done.signal()
            }
            return true
        }
        guard queued else { throw .disconnected }
        wakeUp()
        done.wait()
        return try result.withLock { $0 }.get()
    }

    /// Hands `body` to the owner thread without waiting (run at once on the owner thread;
    /// with `nil` once the connection has ended).
    func enqueue(_ body: @escaping @Sendable (OpaquePointer?) -> Void) {
        let (onOwner, queued) = shared.withLock { shared in
            let onOwner = shared.isOwnerThread
            guard !onOwner, !shared.closing, !shared.disconnected else { return (onOwner, false) }
            shared.work.append(body)
            return (false, true)
        }
        if onOwner { return body(handle) }
        if queued { wakeUp() } else { body(nil) }
    }

    private func wakeUp() {
        var one: UInt64 = 1
        _ = write(wakeDescriptor, &one, 8)
    }

    // MARK: - Slots (owner thread)

    /// Keeps `slot` (a reference this connection owns) until ``releaseSlot(_:)`` or the end.
    func keepSlot(_ slot: OpaquePointer) -> UInt64 {
        nextSlot += 1
        slots[nextSlot] = slot
        return nextSlot
    }

    /// Releases the slot kept under `number` (its handler is not called again).
    func releaseSlot(_ number: UInt64) {
        if let slot = slots.removeValue(forKey: number) { sd_bus_slot_unref(slot) }
    }

    // MARK: - The dispatch thread

    private func loop() {
        var lost = false
        while !lost {
            let (work, closing) = shared.withLock { shared in
                defer { shared.work.removeAll() }
                return (shared.work, shared.closing)
            }
            for item in work { item(handle) }
            if closing { break }
            // Dispatch everything that has arrived.
            while true {
                let processed = sd_bus_process(handle, nil)
                if processed < 0 {
                    lost = true
                    break
                }
                if processed == 0 { break }
            }
            if lost { break }
            let events = sd_bus_get_events(handle)
            if events < 0 {
                lost = true
                break
            }
            var deadline: UInt64 = 0
            var wait: Int32 = -1
            if sd_bus_get_timeout(handle, &deadline) >= 0 && deadline != UInt64.max {
                var now = timespec()
                clock_gettime(CLOCK_MONOTONIC, &now)
                let nowMicroseconds = UInt64(now.tv_sec) * 1_000_000 + UInt64(now.tv_nsec) / 1000
                wait = deadline <= nowMicroseconds ? 0 : Int32(clamping: (deadline - nowMicroseconds + 999) / 1000)
            }
            var descriptors = [
                pollfd(fd: sd_bus_get_fd(handle), events: Int16(truncatingIfNeeded: events), revents: 0),
                pollfd(fd: wakeDescriptor, events: Int16(POLLIN), revents: 0),
            ]
            let polled = poll(&descriptors, 2, wait)
            if polled < 0 && errno != EINTR {
                lost = true
                break
            }
            if descriptors[1].revents != 0 {
                var count: UInt64 = 0
                _ = read(wakeDescriptor, &count, 8)
            }
        }
        finish(lost: lost)
    }

    /// After the loop: the bus is closed and freed on this thread; queued work learns it has ended.
    private func finish(lost: Bool) {
        let (work, handlers) = shared.withLock { shared in
            if lost { shared.disconnected = true } else { shared.closing = true }
            defer {
                shared.work.removeAll()
                shared.disconnectionHandlers.removeAll()
            }
            return (shared.work, lost ? shared.disconnectionHandlers : [])
        }
        for item in work { item(nil) }
        for handler in handlers { handler() }
        for number in Array(slots.keys) { releaseSlot(number) }
        sd_bus_flush_close_unref(handle)
        shared.withLock { $0.ownerThread = nil }
        ended.signal()
    }
}
