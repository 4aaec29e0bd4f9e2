import Foundation
import SystemPackage
@testable import DataProtection

/// The stores the reliability tests build in a scratch directory (the layout of
/// `ProtectedStore(directory:)`: `device/` and `files/`), and build again there
/// after a crash, as a restarted process would.
enum ScratchStore {
    /// A new store at `root` on `fileSystem`, unlocked, with `passcode` set.
    static func unlocked(at root: URL, on fileSystem: any FileSystem, passcode: String) throws -> ProtectedStore {
        let store = try ProtectedStore(directory: root, clock: VirtualClock(), configuration: .testing(), fileSystem: fileSystem)
        try store.device.unlock()
        try store.device.setPasscode(passcode)
        return store
    }

    /// The store at `root` after a restart: a new device (booted, locked) and store on
    /// `fileSystem` (the real one unless given). `old`, the store of the "process" that
    /// died, gives up its ownership first, as the kernel does at a process's exit.
    static func restarted(at root: URL, replacing old: ProtectedStore, on fileSystem: any FileSystem = PosixFileSystem()) throws -> ProtectedStore {
        old.device.relinquishOwnership()
        let device = try Device(directory: FilePath(root.appendingPathComponent("device").path), clock: VirtualClock(),
                                configuration: .testing(), fileSystem: fileSystem)
        return try ProtectedStore(directory: root.appendingPathComponent("files"), device: device)
    }
}
