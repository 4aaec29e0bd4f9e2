import CSystemd
import Foundation

/// The outcome of asking the bus for a well-known name.
public enum DBusNameRequest: Sendable, Hashable {
    /// This connection owns the name now.
    case primaryOwner
    /// This connection owned it already.
    case alreadyOwner
    /// Another connection owns it; this one waits in its queue.
    case queued
    /// Another connection owns it (its unique name, when the bus says).
    case taken(owner: String?)
}

extension DBusConnection {
    /// Asks the bus for the well-known `name`; `replaceExisting` takes it from an owner that
    /// allows it, `allowReplacement` lets a later one take it from this connection, `queue`
    /// waits in line when it is taken.
    public func requestName(_ name: String, replaceExisting: Bool = false, allowReplacement: Bool = false,
                            queue: Bool = false) throws(DBusError) -> DBusNameRequest {
        var flags: UInt64 = 0
        if replaceExisting { flags |= UInt64(SD_BUS_NAME_REPLACE_EXISTING) }
        if allowReplacement { flags |= UInt64(SD_BUS_NAME_ALLOW_REPLACEMENT) }
        if queue { flags |= UInt64(SD_BUS_NAME_QUEUE) }
        let flagsCopy = flags
        let result = try perform { handle in sd_bus_request_name(handle, name, flagsCopy) }
        switch result {
        case 1...: return .primaryOwner
        case 0: return .queued
        case -EALREADY: return .alreadyOwner
        case -EEXIST: return .taken(owner: try? owner(of: name))
        default: throw DBusError("requesting the name \(name)", result: result)
        }
    }

    /// Gives up the well-known `name`.
    public func releaseName(_ name: String) throws(DBusError) {
        let result = try perform { handle in sd_bus_release_name(handle, name) }
        if result < 0 && result != -ESRCH && result != -EADDRINUSE { throw DBusError("releasing the name \(name)", result: result) }
    }

    /// Calls `handler` on the owner thread with every method call to the object at `path`
    /// (with `fallback`, also to every path below it), until the registration is cancelled.
    ///
    /// `handler` returns `true` when it answered the call or will answer it later
    /// (``DBusMessage/reply(_:)``), `false` to leave it to sd-bus (which answers
    /// `UnknownMethod`/`UnknownObject`); what it throws is sent as the error reply.
    public func exportObject(at path: String, fallback: Bool = false,
                             _ handler: @escaping @Sendable (DBusMessage) throws(DBusError) -> Bool) throws(DBusError) -> DBusRegistration {
        try register(handler, "exporting \(path)") { handle, slot, userdata in
            fallback ? sd_bus_add_fallback(handle, slot, path, DBusHandlerBox.callback, userdata)
                : sd_bus_add_object(handle, slot, path, DBusHandlerBox.callback, userdata)
        }
    }

    /// Emits the signal `member` of `interface` from the object at `path`, with `arguments`.
    public func emitSignal(path: String, interface: String, member: String, _ arguments: [DBusValue] = []) throws(DBusError) {
        try perform { handle throws(DBusError) in
            var signal: OpaquePointer?
            var result = sd_bus_message_new_signal(handle, &signal, path, interface, member)
            guard result >= 0, let signal else { throw DBusError("emitting \(interface).\(member)", result: result) }
            defer { sd_bus_message_unref(signal) }
            try DBusMessageCoding.append(arguments, to: signal)
            result = sd_bus_send(handle, signal, nil)
            if result < 0 { throw DBusError("emitting \(interface).\(member)", result: result) }
        }
    }

    /// Emits `org.freedesktop.DBus.Properties.PropertiesChanged` for `interface` at `path`.
    public func emitPropertiesChanged(path: String, interface: String, changed: [String: DBusValue],
                                      invalidated: [String] = []) throws(DBusError) {
        try emitSignal(path: path, interface: "org.freedesktop.DBus.Properties", member: "PropertiesChanged",
                       [.string(interface), .properties(changed), .strings(invalidated)])
    }
}
