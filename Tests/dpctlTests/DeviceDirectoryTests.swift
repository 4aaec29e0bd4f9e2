import DataProtection
import Foundation
import Testing

/// The device's secrets apart from the data (issue 12, semantics "Keys"): where
/// `dpctl` keeps the device directory, and what happens when data and device
/// directories do not belong together.
@Suite("dpctl device directories apart from the data")
struct DeviceDirectoryTests {
    /// Every name under `directory`, recursively.
    static func names(under directory: URL) -> [String] {
        (FileManager.default.enumerator(atPath: directory.path)?.allObjects as? [String] ?? [])
            .map { ($0 as NSString).lastPathComponent }
    }

    @Test("init keeps the device directory under $XDG_STATE_HOME/dpctl/<store id>; the data directory holds no device secret")
    func defaultDeviceDirectory() throws {
        let fixture = try StoreFixture()
        try fixture.initialize()
        let source = try fixture.localFile("a", Data("secret".utf8))
        #expect(try fixture.run(["put", source.path, "a", "--class", "complete"]).status == 0)
        let identifier = try #require(try ProtectedStore.identifier(ofDataDirectory: fixture.store))
        let device = fixture.stateHome.appendingPathComponent("dpctl").appendingPathComponent(identifier)
        #expect(Set(Self.names(under: device)).isSuperset(of: ["uid", "effaceable", "keybag", "attempts"]))
        let data = Self.names(under: fixture.store)
        for secret in ["uid", "effaceable", "keybag", "attempts"] {
            #expect(!data.contains(secret), "\(secret) is in the data directory: \(data)")
        }
        let status = try fixture.run(["status", "--json"])
        #expect(try status.json()["device"] as? String == device.path)
        #expect(try fixture.run(["cat", "a"]).standardOutput == "secret")
    }

    @Test("the data directory moved to another machine without its device directory: integrityFailure (21) with a hint")
    func dataWithoutItsDevice() throws {
        let fixture = try StoreFixture()
        try fixture.initialize()
        let source = try fixture.localFile("a", Data("secret".utf8))
        #expect(try fixture.run(["put", source.path, "a"]).status == 0)
        // Another machine: the same data, another state directory.
        let elsewhere = fixture.directory.appendingPathComponent("other-machine-state")
        let result = try fixture.run(["ls"], extra: ["XDG_STATE_HOME": elsewhere.path])
        #expect(result.status == 21, "\(result.standardError)")
        #expect(result.standardError.contains("device directory"))
        #expect(result.standardError.contains("dpctl: hint:"))
        #expect(!FileManager.default.fileExists(atPath: elsewhere.path), "a device was made for data that has one")
        // With its device directory named explicitly, the same data opens.
        let identifier = try #require(try ProtectedStore.identifier(ofDataDirectory: fixture.store))
        let device = fixture.stateHome.appendingPathComponent("dpctl/\(identifier)")
        let moved = try fixture.run(["cat", "a", "--device", device.path], extra: ["XDG_STATE_HOME": elsewhere.path])
        #expect(moved.status == 0 && moved.standardOutput == "secret", "\(moved.standardError)")
    }

    @Test("--device and DPCTL_DEVICE choose the device directory; another store's device directory is integrityFailure (21)")
    func explicitDeviceDirectory() throws {
        let fixture = try StoreFixture()
        let device = fixture.directory.appendingPathComponent("secrets/device")
        #expect(try fixture.run(["init", "--device", device.path]).status == 0)
        #expect(FileManager.default.fileExists(atPath: device.appendingPathComponent("keybag").path))
        #expect(!FileManager.default.fileExists(atPath: fixture.stateHome.path))
        let source = try fixture.localFile("a", Data("mine".utf8))
        #expect(try fixture.run(["put", source.path, "a"], extra: ["DPCTL_DEVICE": device.path]).status == 0)
        #expect(try fixture.run(["cat", "a"], extra: ["DPCTL_DEVICE": device.path]).standardOutput == "mine")

        // A second store with its own device; crossing them is refused, never served.
        let other = fixture.directory.appendingPathComponent("other")
        let otherDevice = fixture.directory.appendingPathComponent("secrets/other-device")
        #expect(try fixture.run(["init", "--store", other.path, "--device", otherDevice.path]).status == 0)
        let crossed = try fixture.run(["ls", "--device", otherDevice.path])
        #expect(crossed.status == 21, "\(crossed.standardError)")
        #expect(crossed.standardError.contains("belongs to another device"))
    }

    @Test("a store made with device/ and files/ in one directory still opens")
    func combinedLayout() throws {
        let fixture = try StoreFixture()
        do {
            let store = try ProtectedStore(directory: fixture.store, configuration: DeviceConfiguration(passcodeCost: .minimal))
            try store.device.unlock()
            try store.write(Data("old layout".utf8), to: "a", protection: .none)
        }
        let read = try fixture.run(["cat", "a"], passcode: nil)
        #expect(read.status == 0 && read.standardOutput == "old layout", "\(read.standardError)")
        #expect(try fixture.run(["status", "--json"], passcode: nil).json()["device"] as? String
                == fixture.store.appendingPathComponent("device").path)
    }

    @Test("a FIFO planted as the device's attempts file: unlock fails at once (integrityFailure, 21) naming it, instead of waiting for a writer")
    func plantedFIFO() throws {
        let fixture = try StoreFixture()
        try fixture.initialize()
        let device = URL(fileURLWithPath: try #require(try fixture.run(["status", "--json"]).json()["device"] as? String))
        let attempts = device.appendingPathComponent("attempts")
        try FileManager.default.removeItem(at: attempts)
        #expect(mkfifo(attempts.path, 0o600) == 0)
        let process = Process()
        process.executableURL = DPCtlRunner.executable
        process.arguments = ["unlock"]
        process.environment = fixture.environment(passcode: "1234")
        let error = Pipe()
        process.standardError = error
        process.standardOutput = FileHandle.nullDevice
        process.standardInput = FileHandle.nullDevice
        try process.run()
        let deadline = Date().addingTimeInterval(15)
        while process.isRunning && Date() < deadline { Thread.sleep(forTimeInterval: 0.05) }
        let hung = process.isRunning
        if hung { kill(process.processIdentifier, SIGKILL) }  // blocked in open(2): SIGTERM's handler would wait too
        process.waitUntilExit()
        #expect(!hung, "dpctl unlock still waited on the FIFO after 15 s")
        let message = String(decoding: error.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        #expect(process.terminationStatus == 21, "\(message)")
        #expect(message.contains("attempts") && message.contains("not a regular file"), "\(message)")
    }

    @Test(".dpstore removed: dpctl finds the store's only device directory, opens it and the store writes .dpstore again")
    func identityWrittenAgain() throws {
        let fixture = try StoreFixture()
        try fixture.initialize()
        let source = try fixture.localFile("a", Data("secret".utf8))
        #expect(try fixture.run(["put", source.path, "a"]).status == 0)
        let identity = fixture.store.appendingPathComponent(".dpstore")
        let before = try Data(contentsOf: identity)
        try FileManager.default.removeItem(at: identity)
        let read = try fixture.run(["cat", "a"])
        #expect(read.status == 0 && read.standardOutput == "secret", "\(read.standardError)")
        #expect((try? Data(contentsOf: identity)) == before)
    }
}
