import DataProtection
import DataProtectionAgent
import Foundation

/// Where a store's two directories are: the data (encrypted files) and the device
/// (the device key, the effaceable key, the keybag, the attempt counter), kept apart.
///
/// - `--device <dir>` or `$DPCTL_DEVICE` names the device directory;
/// - else a store made before device directories moved out (`<store>/device` and
///   `<store>/files` in one directory) is used as it is;
/// - else the device directory is `$XDG_STATE_HOME/dpctl/<id>` (else
///   `~/.local/state/dpctl/<id>`), `<id>` being the identifier in the data directory.
struct StoreLocation {
    let data: URL
    let device: URL
    /// `device/` and `files/` in the store directory (stores made before 0.2).
    let combined: Bool

    /// Where the store's agent listens: `$DPCTL_AGENT_SOCKET` if set, else
    /// `$XDG_RUNTIME_DIR/dpctl/<store id>.sock`, else `agent.sock` in the device directory.
    var agentSocket: String {
        // The library's rule (AgentStore(forStoreAt:) finds agents the same way).
        (try? AgentSocketLocation.path(forStoreAt: data, deviceDirectory: combined ? nil : device))
            ?? AgentSocketLocation.path(deviceDirectory: device, storeIdentifier: nil)
    }

    /// The device directory named by `--device` or `$DPCTL_DEVICE`, if any.
    static func explicitDevice(_ options: StoreOptions) -> URL? {
        if let device = options.device, !device.isEmpty { return URL(fileURLWithPath: device) }
        if let device = ProcessInfo.processInfo.environment["DPCTL_DEVICE"], !device.isEmpty {
            return URL(fileURLWithPath: device)
        }
        return nil
    }

    /// `$XDG_STATE_HOME/dpctl/<id>`, else `~/.local/state/dpctl/<id>`.
    static func defaultDevice(identifier: String) -> URL {
        AgentSocketLocation.defaultDeviceDirectory(storeIdentifier: identifier)
    }

    /// The existing store of `options`; `nil` if there is none at the store directory.
    static func existing(_ options: StoreOptions) throws(DataProtectionError) -> StoreLocation? {
        let directory = options.directory
        let explicit = explicitDevice(options)
        let combinedDevice = directory.appendingPathComponent("device")
        if explicit == nil, FileManager.default.fileExists(atPath: combinedDevice.path) {
            return StoreLocation(data: directory.appendingPathComponent("files"), device: combinedDevice, combined: true)
        }
        guard let identifier = try ProtectedStore.identifier(ofDataDirectory: directory) else {
            return try withoutIdentity(directory, explicit: explicit)
        }
        let device = explicit ?? defaultDevice(identifier: identifier)
        guard FileManager.default.fileExists(atPath: device.path) else {
            throw DataProtectionError(
                .integrityFailure,
                "The device directory of the store at \(directory.path) is missing (\(device.path)): its data cannot be opened without it.",
                hint: "Copy the device directory from the machine the store was made on, or pass --device <dir> (or set DPCTL_DEVICE).")
        }
        return StoreLocation(data: directory, device: device, combined: false)
    }

    /// A data directory that holds a store (its root's `dpdir`) but lost its `.dpstore`: its
    /// device directory is the one named (`--device`), else the only one under
    /// `$XDG_STATE_HOME/dpctl`. The store writes `.dpstore` again once that device's keys
    /// authenticate the data (`Keys/file-format.md` §11.3 step 3); `nil` if there is no store.
    private static func withoutIdentity(_ directory: URL, explicit: URL?) throws(DataProtectionError) -> StoreLocation? {
        guard FileManager.default.fileExists(atPath: directory.appendingPathComponent("dpdir").path) else { return nil }
        if let explicit { return StoreLocation(data: directory, device: explicit, combined: false) }
        let devices = defaultDevice(identifier: "id").deletingLastPathComponent()
        let candidates = ((try? FileManager.default.contentsOfDirectory(atPath: devices.path)) ?? []).sorted()
            .map { devices.appendingPathComponent($0) }
            .filter { FileManager.default.fileExists(atPath: $0.appendingPathComponent("store-id").path) }
        guard candidates.count == 1 else {
            throw DataProtectionError(
                .integrityFailure,
                "The data directory \(directory.path) holds a store but has lost its identity (.dpstore), and \(candidates.isEmpty ? "no" : "more than one") device directory is under \(devices.path).",
                hint: "Pass its device directory: --device <dir> (or set DPCTL_DEVICE); the store records its identity again.")
        }
        return StoreLocation(data: directory, device: candidates[0], combined: false)
    }
}
