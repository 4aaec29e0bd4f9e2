import DataProtection
import Foundation
import SocketBridge

/// Where a store's agent listens: `$XDG_RUNTIME_DIR/dpctl/<store id>.sock` when the
/// session has a runtime directory, else `agent.sock` in the device directory (both
/// directories only their user can enter).
public enum AgentSocketLocation {
    /// The socket path for the store whose device directory is `deviceDirectory`.
    ///
    /// - Parameters:
    ///   - deviceDirectory: the store's device directory.
    ///   - storeIdentifier: the store's identifier (`ProtectedStore.identifier(ofDataDirectory:)`);
    ///     `nil` for a store made before identifiers, whose socket stays in its device directory.
    ///   - environment: where `XDG_RUNTIME_DIR` is read.
    public static func path(
        deviceDirectory: URL, storeIdentifier: String?, environment: [String: String] = ProcessInfo.processInfo.environment
    ) -> String {
        if let runtime = environment["XDG_RUNTIME_DIR"], runtime.hasPrefix("/"), let storeIdentifier {
            return URL(fileURLWithPath: runtime).appendingPathComponent("dpctl").appendingPathComponent("\(storeIdentifier).sock").path
        }
        return deviceDirectory.appendingPathComponent("agent.sock").path
    }

    /// Makes sure the socket's directory exists, is a directory of this user and that no one
    /// else can enter or write (creating it 0700 when missing).
    static func prepareDirectory(of socketPath: String) throws(DataProtectionError) {
        let directory = (socketPath as NSString).deletingLastPathComponent
        if mkdir(directory, 0o700) != 0 && errno != EEXIST {
            throw DataProtectionError(.ioFailure, "Cannot create the agent's socket directory \(directory): \(String(cString: strerror(errno))).")
        }
        var status = stat()
        guard lstat(directory, &status) == 0, status.st_mode & S_IFMT == S_IFDIR else {
            throw DataProtectionError(.notADirectory, "The agent's socket directory \(directory) is not a directory.")
        }
        guard status.st_uid == getuid(), status.st_mode & 0o077 == 0 else {
            throw DataProtectionError(
                .notPermitted,
                "The agent's socket directory \(directory) is open to others (owner \(status.st_uid), mode \(String(status.st_mode & 0o777, radix: 8))).",
                hint: "chmod 700 \(directory) (it must belong to you and be closed to everyone else).")
        }
    }
}
