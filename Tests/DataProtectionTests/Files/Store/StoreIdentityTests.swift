import Foundation
import Testing
@testable import DataProtection

/// A data directory and its device directory kept apart, and what pairs them
/// (issue 12: "Device secrets apart from the data").
@Suite("Store identity: data and device directories apart")
struct StoreIdentityTests {
    static let configuration = DeviceConfiguration.testing()

    @Test("a store with its device directory apart: the data directory holds no device file, and the pair reopens")
    func apart() throws {
        try withScratchDirectory { root in
            let data = root.appendingPathComponent("data"), device = root.appendingPathComponent("secrets/device")
            try FileManager.default.createDirectory(at: device.deletingLastPathComponent(), withIntermediateDirectories: true)
            do {
                let store = try ProtectedStore(creatingAt: data, deviceDirectory: device, passcode: "1234", configuration: Self.configuration)
                try store.device.unlock(passcode: "1234")
                try store.write(Data("complete".utf8), to: "a", protection: .complete)
            }
            let names = (FileManager.default.enumerator(atPath: data.path)?.allObjects as? [String] ?? [])
            for secret in ["uid", "effaceable", "keybag", "attempts", "lock"] {
                #expect(!names.contains(secret), "\(names)")
            }
            let identifier = try #require(try ProtectedStore.identifier(ofDataDirectory: data))
            #expect(identifier.count == 32)
            let reopened = try ProtectedStore(directory: data, deviceDirectory: device, configuration: Self.configuration)
            try reopened.device.unlock(passcode: "1234")
            #expect(try reopened.contents(atPath: "a") == Data("complete".utf8))
        }
    }

    @Test("data opened with another device's directory, or with a device directory made afresh: integrityFailure, and the data is untouched")
    func mismatched() throws {
        try withScratchDirectory { root in
            let data = root.appendingPathComponent("data"), device = root.appendingPathComponent("device")
            let otherData = root.appendingPathComponent("other-data"), otherDevice = root.appendingPathComponent("other-device")
            do {
                let store = try ProtectedStore(directory: data, deviceDirectory: device, configuration: Self.configuration)
                try store.device.unlock()
                try store.write(Data("x".utf8), to: "a")
                _ = try ProtectedStore(directory: otherData, deviceDirectory: otherDevice, configuration: Self.configuration)
            }
            let crossed = outcome { try ProtectedStore(directory: data, deviceDirectory: otherDevice, configuration: Self.configuration) }
            #expect(crossed.errorCode == .integrityFailure, "\(crossed)")
            let fresh = root.appendingPathComponent("new-device")
            let moved = outcome { try ProtectedStore(directory: data, deviceDirectory: fresh, configuration: Self.configuration) }
            #expect(moved.errorCode == .integrityFailure, "\(moved)")
            // The data is untouched: with its own device it still opens.
            let store = try ProtectedStore(directory: data, deviceDirectory: device, configuration: Self.configuration)
            try store.device.unlock()
            #expect(try store.contents(atPath: "a") == Data("x".utf8))
        }
    }

    @Test("an erase keeps the pairing: the erased store reopens with its device directory")
    func eraseKeepsIdentity() throws {
        try withScratchDirectory { root in
            let data = root.appendingPathComponent("data"), device = root.appendingPathComponent("device")
            let before: String?
            do {
                let store = try ProtectedStore(directory: data, deviceDirectory: device, configuration: Self.configuration)
                before = try ProtectedStore.identifier(ofDataDirectory: data)
                try store.device.unlock()
                try store.write(Data("x".utf8), to: "a")
                try store.device.erase()
            }
            #expect(try ProtectedStore.identifier(ofDataDirectory: data) == before)
            let store = try ProtectedStore(directory: data, deviceDirectory: device, configuration: Self.configuration)
            #expect(try store.contentsOfDirectory(atPath: "/").isEmpty)
        }
    }

    @Test(".dpstore removed: written again from store-id when the device's keys authenticate the data; with another device, integrityFailure and nothing written")
    func identityWrittenAgain() throws {
        try withScratchDirectory { root in
            let data = root.appendingPathComponent("data"), device = root.appendingPathComponent("device")
            let otherData = root.appendingPathComponent("other-data"), otherDevice = root.appendingPathComponent("other-device")
            let identifier: String?
            do {
                let store = try ProtectedStore(directory: data, deviceDirectory: device, configuration: Self.configuration)
                try store.device.unlock()
                try store.write(Data("x".utf8), to: "a")
                identifier = try ProtectedStore.identifier(ofDataDirectory: data)
                _ = try ProtectedStore(directory: otherData, deviceDirectory: otherDevice, configuration: Self.configuration)
            }
            let identity = data.appendingPathComponent(".dpstore")
            try FileManager.default.removeItem(at: identity)
            let crossed = outcome { try ProtectedStore(directory: data, deviceDirectory: otherDevice, configuration: Self.configuration) }
            #expect(crossed.errorCode == .integrityFailure, "\(crossed)")
            #expect(!FileManager.default.fileExists(atPath: identity.path), "another device's id was written")
            let store = try ProtectedStore(directory: data, deviceDirectory: device, configuration: Self.configuration)
            #expect(try ProtectedStore.identifier(ofDataDirectory: data) == identifier)
            try store.device.unlock()
            #expect(try store.contents(atPath: "a") == Data("x".utf8))
        }
    }

    @Test("a planted erase mark (removingData) beside the current data removes nothing; after a real erase of a closed store its files go")
    func plantedEraseMark() throws {
        try withScratchDirectory { root in
            let data = root.appendingPathComponent("data"), device = root.appendingPathComponent("device")
            do {
                let store = try ProtectedStore(directory: data, deviceDirectory: device, configuration: Self.configuration)
                try store.device.unlock()
                try store.write(Data("kept".utf8), to: "Docs/a")
            }
            let mark = device.appendingPathComponent("erasing")
            try Data("removingData\n".utf8).write(to: mark)
            do {
                let store = try ProtectedStore(directory: data, deviceDirectory: device, configuration: Self.configuration)
                try store.device.unlock()
                #expect(try store.contents(atPath: "Docs/a") == Data("kept".utf8))
                #expect(!FileManager.default.fileExists(atPath: mark.path), "the mark is cleared")
            }
            // A real erase with no store open: the next open removes the files from before.
            do {
                let alone = try Device(directory: device, configuration: Self.configuration)
                try alone.erase()
                alone.relinquishOwnership()
            }
            #expect(FileManager.default.fileExists(atPath: mark.path))
            let store = try ProtectedStore(directory: data, deviceDirectory: device, configuration: Self.configuration)
            #expect(try store.contentsOfDirectory(atPath: "/").isEmpty)
            #expect(!FileManager.default.fileExists(atPath: mark.path))
        }
    }
}
