import CSystemd
import Foundation

/// A message received: a signal a match delivered, or a method call to an exported object
/// (answer it with ``reply(_:)`` or ``replyError(_:)``, now or later, from any thread).
///
/// Its header and arguments are read when it arrives; the message itself is kept (for the
/// reply) until this value is released.
public final class DBusMessage: Sendable {
    /// What kind of message it is.
    public enum Kind: Sendable, Hashable {
        /// A method call (it expects a reply unless the caller said not to).
        case methodCall
        /// A method's reply.
        case methodReturn
        /// An error reply.
        case error
        /// A signal.
        case signal
    }

    /// Its kind.
    public let kind: Kind
    /// The unique name of its sender (`nil` when the bus did not say, e.g. on a direct connection).
    public let sender: String?
    /// The object path (`nil` for replies).
    public let path: String?
    /// The interface (`nil` when the caller gave none).
    public let interface: String?
    /// The method or signal name (`nil` for replies).
    public let member: String?
    /// The signature of its body.
    public let signature: String
    /// Its arguments.
    public let arguments: [DBusValue]
    /// The connection it came on.
    public let connection: DBusConnection

    /// The `sd_bus_message` (a reference of ours), used only on the owner thread.
    nonisolated(unsafe) private let message: OpaquePointer

    /// Reads `message` (on the owner thread) and keeps a reference to it.
    init(_ message: OpaquePointer, on connection: DBusConnection) throws(DBusError) {
        var type: UInt8 = 0
        _ = sd_bus_message_get_type(message, &type)
        switch Int32(type) {
        case Int32(SD_BUS_MESSAGE_METHOD_CALL): kind = .methodCall
        case Int32(SD_BUS_MESSAGE_METHOD_RETURN): kind = .methodReturn
        case Int32(SD_BUS_MESSAGE_METHOD_ERROR): kind = .error
        default: kind = .signal
        }
        func text(_ pointer: UnsafePointer<CChar>?) -> String? { pointer.map { String(cString: $0) } }
        sender = text(sd_bus_message_get_sender(message))
        path = text(sd_bus_message_get_path(message))
        interface = text(sd_bus_message_get_interface(message))
        member = text(sd_bus_message_get_member(message))
        signature = text(sd_bus_message_get_signature(message, 1)) ?? ""
        _ = sd_bus_message_rewind(message, 1)
        arguments = try DBusMessageCoding.readAll(message)
        self.connection = connection
        self.message = sd_bus_message_ref(message)
    }

    deinit {
        let message = message
        let pointer = UInt(bitPattern: Int(bitPattern: UnsafeRawPointer(message)))
        connection.enqueue { _ in
            sd_bus_message_unref(OpaquePointer(bitPattern: pointer))
        }
    }

    /// Whether it is the call of `member` on `interface` (or with no interface given).
    public func isMethodCall(_ interface: String, _ member: String) -> Bool {
        kind == .methodCall && self.member == member && (self.interface == nil || self.interface == interface)
    }

    /// Marks this message as carrying a secret (`sd_bus_message_sensitive`): sd-bus erases
    /// its body when it frees the message, instead of leaving it in freed memory. For a
    /// method call whose arguments hold a secret (a Secret Service `CreateItem` or
    /// `SetSecret`); the arguments already read (``arguments``) are Swift values, not erased.
    public func markSensitive() {
        let pointer = bitPattern
        try? connection.perform { _ in _ = sd_bus_message_sensitive(OpaquePointer(bitPattern: pointer)) }
    }

    /// Answers this method call with `values`; with `sensitive`, the reply is marked as
    /// carrying a secret (see ``markSensitive()``): sd-bus erases it when it frees it, once sent.
    public func reply(_ values: [DBusValue] = [], sensitive: Bool = false) throws(DBusError) {
        let pointer = bitPattern
        try connection.perform { handle throws(DBusError) in
            var reply: OpaquePointer?
            var result = sd_bus_message_new_method_return(OpaquePointer(bitPattern: pointer), &reply)
            guard result >= 0, let reply else { throw DBusError("replying", result: result) }
            defer { sd_bus_message_unref(reply) }
            if sensitive {
                result = sd_bus_message_sensitive(reply)
                guard result >= 0 else { throw DBusError("marking a reply sensitive", result: result) }
            }
            try DBusMessageCoding.append(values, to: reply)
            result = sd_bus_send(handle, reply, nil)
            if result < 0 { throw DBusError("sending a reply", result: result) }
        }
    }

    /// Answers this method call with `error`.
    public func replyError(_ error: DBusError) throws(DBusError) {
        let pointer = bitPattern
        try connection.perform { _ throws(DBusError) in
            var busError = sd_bus_error(name: nil, message: nil, _need_free: 0)
            defer { sd_bus_error_free(&busError) }
            _ = sd_bus_error_set(&busError, error.name, error.message)
            let result = sd_bus_reply_method_error(OpaquePointer(bitPattern: pointer), &busError)
            if result < 0 { throw DBusError("sending an error reply", result: result) }
        }
    }

    /// The message pointer as an integer, to cross to the owner thread.
    private var bitPattern: Int { Int(bitPattern: UnsafeRawPointer(message)) }
}
