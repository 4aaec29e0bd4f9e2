import DataProtection
import Foundation
import SodiumBridge
import SystemPackage

/// The store every file-format input is tried against: created once per process
/// in a temporary directory, unlocked, without a passcode, on a virtual clock;
/// it holds one file `f` whose on-disk bytes each input replaces.
final class FuzzFixture: Sendable {
    static let shared = FuzzFixture()

    let root: URL
    let store: ProtectedStore
    /// The on-disk path of `f` (its name is encrypted).
    let filePath: FilePath
    /// The per-file key the harness wraps into every header it fixes up.
    let fileKeys = FileKeys(fileKey: SecureBytes(count: 32) { $0.initializeMemory(as: UInt8.self, repeating: 0x5a) })
    /// A fixed key for the keybag seal and the attempt counter MAC.
    let fixedKey = SecureBytes(count: 32) { $0.initializeMemory(as: UInt8.self, repeating: 0xa5) }

    private init() {
        root = FileManager.default.temporaryDirectory.appendingPathComponent("dpfuzz-\(getpid())-\(UUID().uuidString)")
        do {
            store = try ProtectedStore(directory: root, clock: VirtualClock(),
                                       configuration: DeviceConfiguration(passcodeCost: .fixed(operations: 1, memoryBytes: 8192)))
            try store.device.unlock()
            try store.write(Data("seed".utf8), to: "f", protection: .none)
            let files = root.appendingPathComponent("files")
            let names = try FileManager.default.contentsOfDirectory(atPath: files.path).filter { $0 != "dpdir" && !$0.hasPrefix(".") }
            precondition(names.count == 1, "the fuzz fixture holds one file")
            filePath = FilePath(files.appendingPathComponent(names[0]).path)
        } catch {
            fatalError("fuzz fixture: \(error)")
        }
        atexit { try? FileManager.default.removeItem(at: FuzzFixture.shared.root) }
    }

    /// A fresh scratch directory under the fixture root.
    func scratchDirectory() -> URL {
        let url = root.appendingPathComponent("scratch-\(UUID().uuidString)")
        try? FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }
}
