import Foundation
import SystemPackage

extension ProtectedStore {
    /// Opens the store that exists in `directory`, and only that: a mistyped path is
    /// ``DataProtectionError/Code/fileNotFound``, never a new, empty store.
    ///
    /// - Parameters:
    ///   - directory: the store's data directory, or, without `deviceDirectory`, the directory
    ///     holding both (`device/` and `files/` inside, as ``init(directory:clock:configuration:)`` makes them).
    ///   - deviceDirectory: the store's device directory, when it is kept apart from the data.
    ///   - clock: the clock grace periods, inactivity and passcode delays are measured on.
    ///   - configuration: the device's rules (grace period, inactivity, passcode cost, …).
    /// - Throws: ``DataProtectionError/Code/fileNotFound`` with a hint when there is no store
    ///   there; then the errors of opening it (``DataProtectionError/Code/storeBusy``,
    ///   ``DataProtectionError/Code/integrityFailure``, …).
    public convenience init(
        existingAt directory: URL,
        deviceDirectory: URL? = nil,
        clock: any DeviceClock = SystemClock.shared,
        configuration: DeviceConfiguration = DeviceConfiguration()
    ) throws(DataProtectionError) {
        let device = deviceDirectory ?? directory.appendingPathComponent("device")
        let data = deviceDirectory == nil ? directory.appendingPathComponent("files") : directory
        let files = DeviceFiles(directory: FilePath(device.path), fileSystem: PosixFileSystem())
        let hasDevice = FileManager.default.fileExists(atPath: files.effaceable.string)
            || FileManager.default.fileExists(atPath: files.keybag.string)
        guard hasDevice, FileManager.default.fileExists(atPath: data.path) else {
            let create = deviceDirectory == nil
                ? "ProtectedStore(creatingAt:passcode:)" : "ProtectedStore(creatingAt:deviceDirectory:passcode:)"
            throw DataProtectionError(
                .fileNotFound, "No store at \(directory.path)\(deviceDirectory.map { " (device directory \($0.path))" } ?? "").",
                hint: "Check the path, or create a store there with \(create) (`dpctl init`).")
        }
        if let deviceDirectory {
            try self.init(directory: directory, deviceDirectory: deviceDirectory, clock: clock, configuration: configuration)
        } else {
            try self.init(directory: directory, clock: clock, configuration: configuration)
        }
    }
}
