import DataProtectionSQLite
import Foundation
import SodiumBridge
import Testing
@testable import DataProtection
@testable import DataProtectionBackup

/// Keychain items in a backup: the migrating ones travel, with their secrets, label and
/// attributes; `…ThisDeviceOnly` ones never; a locked class fails the backup.
@Suite("Backups: keychain items")
struct BackupItemsTests {
    @Test("whenUnlocked and afterFirstUnlock items restore on a second device; ThisDeviceOnly items stay behind")
    func itemsTravel() throws {
        try withScratch { root in
            let source = try makeStore(in: root, name: "source")
            let keychain = source.keychain
            try keychain.add(ItemSecret("token-1"), label: "API token", attributes: ["service": "api", "account": "me"],
                             accessibility: .whenUnlocked, replacing: false)
            try keychain.add(ItemSecret(bytes: [0, 1, 2, 255]), label: "binary", attributes: ["service": "bin"],
                             accessibility: .afterFirstUnlock, replacing: false)
            for accessibility: ItemAccessibility in [.whenUnlockedThisDeviceOnly, .afterFirstUnlockThisDeviceOnly, .whenPasscodeSetThisDeviceOnly] {
                try keychain.add(ItemSecret("stays-\(accessibility.rawValue)"), label: "local", attributes: ["service": accessibility.rawValue],
                                 accessibility: accessibility, replacing: false)
            }
            try source.write(Data("a file".utf8), to: "f", protection: .complete, options: [])
            let identity = AgeIdentity.generate()
            let archive = root.appendingPathComponent("backup.age")
            do {
                let (output, descriptor) = try fileOutput(archive)
                defer { try? descriptor.close() }
                let summary = try Backup.create(of: source, device: source.device, to: output, recipients: [identity.recipient!],
                                                items: KeychainBackupItems(keychain))
                #expect(summary.entries.contains { $0.kind == .items })
            }
            // Nothing of a ThisDeviceOnly secret in the archive's plaintext.
            let tar = try decryptWithAge(archive, identity: identity, in: root)
            for accessibility in ["whenUnlockedThisDeviceOnly", "afterFirstUnlockThisDeviceOnly", "whenPasscodeSetThisDeviceOnly"] {
                #expect(tar.range(of: Data(Data("stays-\(accessibility)".utf8).base64EncodedString().utf8)) == nil)
            }
            let target = try makeStore(in: root, name: "target", passcode: "other")
            do {
                let (input, descriptor) = try fileInput(archive)
                defer { try? descriptor.close() }
                try Backup.restore(from: input, identities: [identity], into: target, items: KeychainBackupItems(target.keychain))
            }
            let restored = try target.keychain.items(matching: [:])
            #expect(Set(restored.items.map(\.label)) == ["API token", "binary"])
            let token = try #require(restored.items.first { $0.label == "API token" })
            #expect(token.attributes == ["service": "api", "account": "me"] && token.accessibility == .whenUnlocked)
            #expect(try target.keychain.secret(ofItemWithID: token.id).matches(ItemSecret("token-1")))
            let binary = try #require(restored.items.first { $0.label == "binary" })
            #expect(try target.keychain.secret(ofItemWithID: binary.id).matches(ItemSecret(bytes: [0, 1, 2, 255])))
            #expect(binary.accessibility == .afterFirstUnlock)
            #expect(try target.contents(atPath: "f") == Data("a file".utf8))
        }
    }

    @Test("a backup while whenUnlocked items are locked fails with protectedDataUnavailable and writes nothing")
    func lockedItems() throws {
        try withScratch { root in
            let source = try ProtectedStore(creatingAt: root.appendingPathComponent("s"), deviceDirectory: root.appendingPathComponent("s-device"),
                                            passcode: "1234", configuration: DeviceConfiguration(gracePeriod: .zero, passcodeCost: .minimal))
            try source.device.unlock(passcode: "1234")
            try source.keychain.add(ItemSecret("t"), label: "t", attributes: ["service": "s"], accessibility: .whenUnlocked, replacing: false)
            try source.write(Data("x".utf8), to: "c", protection: .completeUntilFirstUserAuthentication, options: [])
            try source.device.lock()
            let archive = root.appendingPathComponent("backup.age")
            let (output, descriptor) = try fileOutput(archive)
            defer { try? descriptor.close() }
            do throws(DataProtectionError) {
                try Backup.create(of: source, device: source.device, to: output, recipients: [AgeIdentity.generate().recipient!],
                                  items: KeychainBackupItems(source.keychain))
                Issue.record("a backup with locked items succeeded")
            } catch {
                #expect(error.code == .protectedDataUnavailable, "\(error)")
                #expect(error.message.contains("whenUnlocked"), "\(error)")
            }
            #expect((try? FileManager.default.attributesOfItem(atPath: archive.path)[.size] as? Int) ?? 0 == 0)
        }
    }

    /// The plaintext tar of `archive`, by the real `age -d`.
    func decryptWithAge(_ archive: URL, identity: AgeIdentity, in root: URL) throws -> Data {
        let key = root.appendingPathComponent("key.txt")
        let line = try #require(identity.identityFileLine)
        try line.bytes.withUnsafeBytes { try Data($0).write(to: key) }
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: key.path)
        let tar = root.appendingPathComponent("plain.tar")
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/age")
        process.arguments = ["-d", "-i", key.path, "-o", tar.path, archive.path]
        try process.run()
        process.waitUntilExit()
        #expect(process.terminationStatus == 0)
        return try Data(contentsOf: tar)
    }
}
