import CSystemd
import Foundation
import Synchronization

/// A registration on a connection (a signal match, an exported object): its handler runs until
/// ``cancel()`` or the connection's end.
public final class DBusRegistration: Sendable {
    private let connection: DBusConnection
    private let number: UInt64

    init(_ connection: DBusConnection, number: UInt64) {
        self.connection = connection
        self.number = number
    }

    /// Stops the registration: its handler is not called again once this returns.
    public func cancel() {
        let number = number
        connection.enqueue { [connection] handle in
            if handle != nil { connection.releaseSlot(number) }
        }
    }
}

/// What a registration's C callback reaches: the Swift handler (retained by the slot, released
/// by the slot's destroy callback).
final class DBusHandlerBox: Sendable {
    let connection: DBusConnection
    let handler: @Sendable (DBusMessage) throws(DBusError) -> Bool

    init(_ connection: DBusConnection, _ handler: @escaping @Sendable (DBusMessage) throws(DBusError) -> Bool) {
        self.connection = connection
        self.handler = handler
    }

    /// The C callback of matches and objects: 1 when handled, 0 to let sd-bus go on, an error
    /// (set in `error`) when the handler threw.
    static let callback: sd_bus_message_handler_t = { message, userdata, busError in
        guard let message, let userdata else { return 0 }
        let box = Unmanaged<DBusHandlerBox>.fromOpaque(userdata).takeUnretainedValue()
        do throws(DBusError) {
            let received = try DBusMessage(message, on: box.connection)
            return try box.handler(received) ? 1 : 0
        } catch {
            _ = sd_bus_error_set(busError, error.name, error.message)
            return -EINVAL
        }
    }

    static let destroy: sd_bus_destroy_t = { userdata in
        guard let userdata else { return }
        Unmanaged<DBusHandlerBox>.fromOpaque(userdata).release()
    }
}

extension DBusConnection {
    /// Registers `handler` through `register` (an sd-bus call making a slot with the box as
    /// userdata) and keeps the slot.
    func register(_ handler: @escaping @Sendable (DBusMessage) throws(DBusError) -> Bool,
                  _ what: String,
                  _ register: @escaping @Sendable (OpaquePointer, UnsafeMutablePointer<OpaquePointer?>, UnsafeMutableRawPointer) -> Int32)
        throws(DBusError) -> DBusRegistration {
        let box = DBusHandlerBox(self, handler)
        let number = try perform { [self] handle throws(DBusError) -> UInt64 in
            let userdata = Unmanaged.passRetained(box).toOpaque()
            var slot: OpaquePointer?
            let result = register(handle, &slot, userdata)
            guard result >= 0, let slot else {
                Unmanaged<DBusHandlerBox>.fromOpaque(userdata).release()
                throw DBusError(what, result: result)
            }
            _ = sd_bus_slot_set_destroy_callback(slot, DBusHandlerBox.destroy)
            return keepSlot(slot)
        }
        return DBusRegistration(self, number: number)
    }

    /// Calls `member` of `interface` on the object at `path` of `destination` with `arguments`,
    /// and returns the reply's values.
    ///
    /// Waits for the reply (up to `timeout`); from the owner thread (inside a handler) the
    /// call blocks the dispatch of other messages until it is answered.
    ///
    /// - Throws: the error reply (its name and message), or a local failure.
    public func call(_ destination: String, path: String, interface: String, member: String,
                     _ arguments: [DBusValue] = [], timeout: Duration = .seconds(25)) throws(DBusError) -> [DBusValue] {
        let microseconds = UInt64(max(1, timeout.components.seconds * 1_000_000 + timeout.components.attoseconds / 1_000_000_000_000))
        let onOwner = shared.withLock { $0.isOwnerThread }
        if onOwner {
            return try perform { [self] handle throws(DBusError) -> [DBusValue] in
                let call = try newCall(handle, destination, path, interface, member, arguments)
                defer { sd_bus_message_unref(call) }
                var error = sd_bus_error(name: nil, message: nil, _need_free: 0)
                defer { sd_bus_error_free(&error) }
                var reply: OpaquePointer?
                let result = sd_bus_call(handle, call, microseconds, &error, &reply)
                guard result >= 0, let reply else { throw Self.failure(error, result, "calling \(interface).\(member)") }
                defer { sd_bus_message_unref(reply) }
                return try DBusMessageCoding.readAll(reply)
            }
        }
        let pending = DBusPendingCall()
        try perform { [self] handle throws(DBusError) in
            let call = try newCall(handle, destination, path, interface, member, arguments)
            defer { sd_bus_message_unref(call) }
            let userdata = Unmanaged.passRetained(pending).toOpaque()
            var slot: OpaquePointer?
            let result = sd_bus_call_async(handle, &slot, call, DBusPendingCall.callback, userdata, microseconds)
            guard result >= 0, let slot else {
                Unmanaged<DBusPendingCall>.fromOpaque(userdata).release()
                throw DBusError("calling \(interface).\(member)", result: result)
            }
            // The bus owns the slot from now on; its end (reply, timeout, bus gone) releases the box.
            _ = sd_bus_slot_set_destroy_callback(slot, DBusPendingCall.destroy)
            _ = sd_bus_slot_set_floating(slot, 1)
            sd_bus_slot_unref(slot)
        }
        return try pending.wait()
    }

    /// The value of property `name` of `interface` on the object at `path` of `destination`
    /// (`org.freedesktop.DBus.Properties.Get`, the variant unwrapped).
    public func property(_ destination: String, path: String, interface: String, name: String,
                         timeout: Duration = .seconds(25)) throws(DBusError) -> DBusValue {
        let reply = try call(destination, path: path, interface: "org.freedesktop.DBus.Properties", member: "Get",
                             [.string(interface), .string(name)], timeout: timeout)
        guard let value = reply.first else { throw .invalidArguments("Properties.Get answered nothing.") }
        return value.unwrapped
    }

    /// Every property of `interface` on the object at `path` of `destination`
    /// (`org.freedesktop.DBus.Properties.GetAll`, variants unwrapped).
    public func properties(_ destination: String, path: String, interface: String,
                           timeout: Duration = .seconds(25)) throws(DBusError) -> [String: DBusValue] {
        let reply = try call(destination, path: path, interface: "org.freedesktop.DBus.Properties", member: "GetAll",
                             [.string(interface)], timeout: timeout)
        guard let values = reply.first?.stringKeyedDictionary else { throw .invalidArguments("Properties.GetAll answered no a{sv}.") }
        return values
    }

    /// Calls `handler` on the owner thread with every signal that matches (`nil`: any sender,
    /// path, interface or member), until the registration is cancelled.
    public func matchSignal(sender: String? = nil, path: String? = nil, interface: String? = nil, member: String? = nil,
                            _ handler: @escaping @Sendable (DBusMessage) -> Void) throws(DBusError) -> DBusRegistration {
        try register({ message in
            handler(message)
            return false
        }, "adding a signal match") { handle, slot, userdata in
            sd_bus_match_signal(handle, slot, sender, path, interface, member, DBusHandlerBox.callback, userdata)
        }
    }

    /// The unique name owning `name` on the bus (`nil`: nobody).
    public func owner(of name: String) throws(DBusError) -> String? {
        do {
            let reply = try call("org.freedesktop.DBus", path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus",
                                 member: "GetNameOwner", [.string(name)])
            return reply.first?.stringValue
        } catch where error.name == "org.freedesktop.DBus.Error.NameHasNoOwner" {
            return nil
        }
    }

    // MARK: - Helpers (owner thread)

    func newCall(_ handle: OpaquePointer, _ destination: String, _ path: String, _ interface: String, _ member: String,
                 _ arguments: [DBusValue]) throws(DBusError) -> OpaquePointer {
        var call: OpaquePointer?
        let result = sd_bus_message_new_method_call(handle, &call, destination, path, interface, member)
        guard result >= 0, let call else { throw DBusError("calling \(interface).\(member)", result: result) }
        do {
            try DBusMessageCoding.append(arguments, to: call)
        } catch {
            sd_bus_message_unref(call)
            throw error
        }
        return call
    }

    static func failure(_ error: sd_bus_error, _ result: Int32, _ operation: String) -> DBusError {
        if let name = error.name {
            return DBusError(name: String(cString: name), message: error.message.map { String(cString: $0) } ?? "")
        }
        return DBusError(operation, result: result)
    }
}

/// A method call waiting for its reply on another thread than the owner.
final class DBusPendingCall: Sendable {
    private let outcome = Mutex<Result<[DBusValue], DBusError>?>(nil)
    private let done = DispatchSemaphore(value: 0)

    func finish(_ result: Result<[DBusValue], DBusError>) {
        let first = outcome.withLock { outcome in
            guard outcome == nil else { return false }
            outcome = result
            return true
        }
        if first { done.signal() }
    }

    func wait() throws(DBusError) -> [DBusValue] {
        done.wait()
        return try outcome.withLock { $0 ?? .failure(.disconnected) }.get()
    }

    static let callback: sd_bus_message_handler_t = { reply, userdata, _ in
        guard let reply, let userdata else { return 0 }
        let pending = Unmanaged<DBusPendingCall>.fromOpaque(userdata).takeUnretainedValue()
        if let error = sd_bus_message_get_error(reply), let name = error.pointee.name {
            pending.finish(.failure(DBusError(name: String(cString: name), message: error.pointee.message.map { String(cString: $0) } ?? "")))
        } else {
            pending.finish(Result { () throws(DBusError) -> [DBusValue] in try DBusMessageCoding.readAll(reply) })
        }
        return 1
    }

    /// The slot's end: a call never answered (the bus went away) fails as disconnected.
    static let destroy: sd_bus_destroy_t = { userdata in
        guard let userdata else { return }
        let pending = Unmanaged<DBusPendingCall>.fromOpaque(userdata).takeRetainedValue()
        pending.finish(.failure(.disconnected))
    }
}
