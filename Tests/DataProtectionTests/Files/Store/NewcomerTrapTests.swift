import DataProtection
import Foundation
import Testing

/// What stopped a newcomer in the first hour, each failing before its fix.
@Suite("Newcomer traps")
struct NewcomerTrapTests {
    @Test("creating a store makes its missing parents, closed to others; so does opening one")
    func missingParentsAreMade() throws {
        try withScratchDirectory { root in
            let deep = root.appendingPathComponent("a/b/c/store")
            let store = try ProtectedStore(creatingAt: deep, passcode: "1234", configuration: .testing())
            #expect(store.device.hasPasscode)
            for folder in ["a", "a/b", "a/b/c"] {
                let mode = try FileManager.default.attributesOfItem(atPath: root.appendingPathComponent(folder).path)[.posixPermissions] as? Int
                #expect(mode == 0o700, "\(folder): mode \(String(mode ?? -1, radix: 8))")
            }
            let apart = try ProtectedStore(directory: root.appendingPathComponent("x/data"),
                                           deviceDirectory: root.appendingPathComponent("y/device"), configuration: .testing())
            try apart.device.unlock()
            try apart.write(Data("kept".utf8), to: "a.txt")
            #expect(try apart.contents(atPath: "a.txt") == Data("kept".utf8))
        }
    }

    @Test("opening an existing store only: a mistyped path is fileNotFound with a hint, and creates nothing")
    func existingOnly() throws {
        try withScratchDirectory { root in
            let typo = root.appendingPathComponent("stroe")
            do {
                _ = try ProtectedStore(existingAt: typo, configuration: .testing())
                Issue.record("a store was opened where there is none")
            } catch let error as DataProtectionError {
                #expect(error.code == .fileNotFound)
                #expect(error.hint?.contains("creatingAt") == true, "\(error)")
            }
            #expect(!FileManager.default.fileExists(atPath: typo.path), "the failed open created \(typo.path)")

            let made = root.appendingPathComponent("store")
            do {
                let store = try ProtectedStore(creatingAt: made, passcode: "1234", configuration: .testing())
                try store.device.unlock(passcode: "1234")
                try store.write(Data("hello".utf8), to: "Documents/a.txt", protection: .complete)
            }
            let reopened = try ProtectedStore(existingAt: made, configuration: .testing())
            try reopened.device.unlock(passcode: "1234")
            #expect(try reopened.contents(atPath: "Documents/a.txt") == Data("hello".utf8))
        }
    }

    @Test("a second ProtectedStore on one store in one process fails at once, saying so")
    func secondOpenInProcess() throws {
        try withScratchDirectory { root in
            let store = try ProtectedStore(directory: root, configuration: .testing())
            let started = ContinuousClock.now
            do {
                _ = try ProtectedStore(directory: root)   // the default 30 s ownership timeout
                Issue.record("opened twice")
            } catch let error as DataProtectionError {
                #expect(error.code == .storeBusy)
                #expect(error.message.contains("This process already owns"), "\(error)")
            }
            #expect(ContinuousClock.now - started < .seconds(5))
            _ = store
        }
    }

    @Test("createDirectory takes Foundation's attributes: the protection key gives the class")
    func createDirectoryWithAttributes() throws {
        try withScratchDirectory { root in
            let store = try ProtectedStore(directory: root, configuration: .testing())
            try store.createDirectory(atPath: "Private", attributes: [.protectionKey: FileProtectionType.complete])
            #expect(try store.attributesOfItem(atPath: "Private").protectionClass == .complete)
            try store.createDirectory(atPath: "Plain", withIntermediateDirectories: false, attributes: nil)
            #expect(try store.attributesOfItem(atPath: "Plain").protectionClass == .completeUntilFirstUserAuthentication)
            #expect(throws: DataProtectionError.self) {
                try store.createDirectory(atPath: "Owned", attributes: [.ownerAccountName: "root"])
            }
            #expect(!store.fileExists(atPath: "Owned"))
        }
    }

    @Test("the async variants of unlock, passcode changes, write and contents behave as the synchronous ones")
    func asyncVariants() async throws {
        try await withScratchDirectory { root in
            let store = try ProtectedStore(directory: root, configuration: .testing())
            try await store.device.unlock()
            try await store.device.setPasscode("1234")
            try await store.write(Data("async".utf8), to: "Documents/a.txt", protection: .complete)
            #expect(try await store.contents(atPath: "Documents/a.txt") == Data("async".utf8))
            try store.device.lock()
            await #expect(throws: DataProtectionError.self) { _ = try await store.contents(atPath: "Documents/a.txt") }
            try await store.device.unlock(passcode: "1234")
            try await store.device.changePasscode(from: "1234", to: "5678")
            try await store.device.removePasscode("5678")
            #expect(!store.device.hasPasscode)

        }
    }
}
