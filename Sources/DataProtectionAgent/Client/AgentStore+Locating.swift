import DataProtection
import Foundation

extension AgentSocketLocation {
    /// Where the agent of the store in `dataDirectory` listens, by `dpctl`'s rules:
    /// `$DPCTL_AGENT_SOCKET` when set; else, for a store keeping `device/` and `files/` in one
    /// directory (`dataDirectory` being that directory, or its `files/`), `agent.sock` in its
    /// device directory; else `$XDG_RUNTIME_DIR/dpctl/<store id>.sock`, else `agent.sock` in the
    /// device directory (`deviceDirectory`, else `$XDG_STATE_HOME/dpctl/<store id>`, else
    /// `~/.local/state/dpctl/<store id>`).
    ///
    /// - Throws: `fileNotFound` when there is no store in
    ///   `dataDirectory` (and no `DPCTL_AGENT_SOCKET` to go by).
    public static func path(
        forStoreAt dataDirectory: URL, deviceDirectory: URL? = nil,
        environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws(DataProtectionError) -> String {
        if let socket = environment["DPCTL_AGENT_SOCKET"], !socket.isEmpty { return socket }
        let combinedDevice = dataDirectory.appendingPathComponent("device")
        if deviceDirectory == nil, FileManager.default.fileExists(atPath: combinedDevice.path) {
            return path(deviceDirectory: combinedDevice, storeIdentifier: nil, environment: environment)
        }
        if deviceDirectory == nil, dataDirectory.lastPathComponent == "files",
           FileManager.default.fileExists(atPath: dataDirectory.deletingLastPathComponent().appendingPathComponent("device").path) {
            return path(deviceDirectory: dataDirectory.deletingLastPathComponent().appendingPathComponent("device"),
                        storeIdentifier: nil, environment: environment)
        }
        guard let identifier = try ProtectedStore.identifier(ofDataDirectory: dataDirectory) else {
            throw DataProtectionError(.fileNotFound, "No store at \(dataDirectory.path).",
                                      hint: "Check the path, or create a store there (`dpctl init`).")
        }
        let device = deviceDirectory ?? defaultDeviceDirectory(storeIdentifier: identifier, environment: environment)
        return path(deviceDirectory: device, storeIdentifier: identifier, environment: environment)
    }

    /// A store's device directory when none is given: `$XDG_STATE_HOME/dpctl/<id>`, else
    /// `~/.local/state/dpctl/<id>`.
    public static func defaultDeviceDirectory(
        storeIdentifier: String, environment: [String: String] = ProcessInfo.processInfo.environment
    ) -> URL {
        let state = environment["XDG_STATE_HOME"].flatMap { $0.hasPrefix("/") ? URL(fileURLWithPath: $0) : nil }
            ?? FileManager.default.homeDirectoryForCurrentUser.appendingPathComponent(".local/state")
        return state.appendingPathComponent("dpctl").appendingPathComponent(storeIdentifier)
    }
}

extension AgentStore {
    /// Connects to the agent serving the store in `dataDirectory`, found as `dpctl` finds it
    /// (``AgentSocketLocation/path(forStoreAt:deviceDirectory:environment:)``: `DPCTL_AGENT_SOCKET`
    /// included).
    ///
    /// - Throws: `fileNotFound` when there is no such store, or no
    ///   agent serves it (the message names the socket; the hint says how to start one);
    ///   the errors of ``init(socketPath:patience:)``.
    public convenience init(
        forStoreAt dataDirectory: URL, deviceDirectory: URL? = nil,
        environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws(DataProtectionError) {
        let socket = try AgentSocketLocation.path(forStoreAt: dataDirectory, deviceDirectory: deviceDirectory, environment: environment)
        guard FileManager.default.fileExists(atPath: socket) else {
            throw DataProtectionError(
                .fileNotFound, "No agent serves the store at \(dataDirectory.path) (no socket at \(socket)).",
                hint: "Start one: `dpctl agent start`, or an AgentServer in your program.")
        }
        try self.init(socketPath: socket)
    }
}
