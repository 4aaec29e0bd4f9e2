import Foundation

/// A D-Bus failure: an error reply (its D-Bus error name and message) or a local failure of
/// sd-bus (`name` is then `org.freedesktop.DBus.Error.*` mapped from the `errno`, see ``errno``).
public struct DBusError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The D-Bus error name, e.g. `org.freedesktop.DBus.Error.ServiceUnknown`.
    public var name: String
    /// The human-readable message.
    public var message: String
    /// The `errno` of a local failure (0 for an error reply).
    public var errno: Int32

    /// An error with `name` and `message` (an error reply, or one a handler answers with).
    public init(name: String, message: String, errno: Int32 = 0) {
        self.name = name
        self.message = message
        self.errno = errno
    }

    /// A local failure of `operation` with sd-bus's negative `result`.
    init(_ operation: String, result: Int32) {
        let code = -result
        self.init(name: "org.freedesktop.DBus.Error.Failed", message: "\(operation): \(String(cString: strerror(code)))", errno: code)
    }

    /// The bus connection is closed (the daemon went away, or ``DBusConnection/close()``).
    public static let disconnected = DBusError(name: "org.freedesktop.DBus.Error.Disconnected", message: "The bus connection is closed.", errno: ENOTCONN)

    /// The method is not known (`org.freedesktop.DBus.Error.UnknownMethod`).
    public static func unknownMethod(_ message: String) -> DBusError {
        DBusError(name: "org.freedesktop.DBus.Error.UnknownMethod", message: message)
    }

    /// The arguments are not what the method takes (`org.freedesktop.DBus.Error.InvalidArgs`).
    public static func invalidArguments(_ message: String) -> DBusError {
        DBusError(name: "org.freedesktop.DBus.Error.InvalidArgs", message: message)
    }

    public var description: String { "\(name): \(message)" }
}
