import CSystemd
import Foundation

/// The service manager's notification protocol (`sd_notify(3)`): a unit of `Type=notify`
/// tells systemd it is ready, what it is doing, and that it is stopping.
public enum ServiceManagerNotification {
    /// Sends `state` (newline-separated assignments such as `READY=1`, `STATUS=…`,
    /// `STOPPING=1`) to `$NOTIFY_SOCKET`. Returns `false` when there is no such socket (not
    /// started by a service manager) or the send failed.
    @discardableResult
    public static func send(_ state: String) -> Bool {
        sd_notify(0, state) > 0
    }

    /// Tells the service manager the service is ready (`READY=1`), with `status`.
    @discardableResult
    public static func ready(status: String? = nil) -> Bool {
        send("READY=1" + (status.map { "\nSTATUS=" + $0 } ?? ""))
    }

    /// Tells the service manager the service is stopping (`STOPPING=1`).
    @discardableResult
    public static func stopping() -> Bool {
        send("STOPPING=1")
    }

    /// Tells the service manager what the service is doing now (`STATUS=`, one line).
    @discardableResult
    public static func status(_ text: String) -> Bool {
        send("STATUS=" + text.replacingOccurrences(of: "\n", with: " "))
    }
}
