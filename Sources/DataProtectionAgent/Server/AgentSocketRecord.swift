import DataProtection
import Foundation

/// Where the running agent of a store listens, written in its device directory (`agent-socket`:
/// `<pid> <socket path>\n`, mode 0600) while it serves: a client that finds no agent at the
/// socket it computed, because the agent was started with another `DPCTL_AGENT_SOCKET`, can
/// say so at once instead of waiting for a store the agent owns. The device directory is the
/// user's and closed to others; the record is informative, never used to connect.
public struct AgentSocketRecord: Sendable, Hashable {
    /// The file's name in the device directory.
    public static let fileName = "agent-socket"

    /// The agent's process.
    public let processIdentifier: Int32
    /// Its socket.
    public let socketPath: String

    /// The record of a running agent in `deviceDirectory`: `nil` when there is none, or when
    /// the process it names has gone.
    public static func running(in deviceDirectory: URL) -> AgentSocketRecord? {
        let url = deviceDirectory.appendingPathComponent(fileName)
        guard let text = try? String(contentsOf: url, encoding: .utf8),
              let space = text.firstIndex(of: " "), let pid = Int32(text[..<space]), pid > 0 else { return nil }
        let path = text[text.index(after: space)...].trimmingCharacters(in: .newlines)
        guard !path.isEmpty, kill(pid, 0) == 0 || errno == EPERM else { return nil }
        return AgentSocketRecord(processIdentifier: pid, socketPath: path)
    }

    /// Writes this process's record for `socketPath` (replacing any).
    static func write(socketPath: String, in deviceDirectory: URL) {
        let url = deviceDirectory.appendingPathComponent(fileName)
        let temporary = deviceDirectory.appendingPathComponent(".\(fileName).\(getpid())")
        let text = "\(getpid()) \(socketPath)\n"
        guard FileManager.default.createFile(atPath: temporary.path, contents: Data(text.utf8),
                                             attributes: [.posixPermissions: 0o600]) else { return }
        if rename(temporary.path, url.path) != 0 { unlink(temporary.path) }
    }

    /// Removes the record, if it is still this process's.
    static func remove(in deviceDirectory: URL) {
        if running(in: deviceDirectory)?.processIdentifier == getpid() {
            unlink(deviceDirectory.appendingPathComponent(fileName).path)
        }
    }
}
