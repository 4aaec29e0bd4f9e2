import Foundation
import Synchronization
import SodiumBridge
import Testing
@testable import DataProtection
@testable import DataProtectionBackup

/// Backup of a whole store and its restore on another device; the archive read by the real
/// `age` and `tar`.
@Suite("Backups: create, restore on a second device, read without dpctl")
struct BackupRoundTripTests {
    /// A store with every class, nested directories, an empty file, a long non-ASCII name and
    /// a file of several chunks.
    static func populate(_ store: ProtectedStore) throws {
        try store.setProtectionClass(.completeUnlessOpen, ofItemAtPath: "/")
        for protectionClass in ProtectionClass.allCases {
            try store.createDirectory(atPath: "classes/\(protectionClass.rawValue)", withIntermediateDirectories: true,
                                      protection: ProtectionChoice(protectionClass))
            try store.write(Data("content of \(protectionClass.rawValue)".utf8), to: "classes/\(protectionClass.rawValue)/file",
                            protection: ProtectionChoice(protectionClass), options: [])
        }
        try store.createDirectory(atPath: "a/b/c/d", withIntermediateDirectories: true, protection: .none)
        try store.write(Data(), to: "a/b/c/d/empty", protection: .complete, options: [])
        let long = "a/" + String(repeating: "ü", count: 60) + "/" + String(repeating: "n", count: 120)
        try store.createDirectory(atPath: String(long.split(separator: "/").dropLast().joined(separator: "/")), withIntermediateDirectories: true, protection: .inherited)
        try store.write(Data("long name".utf8), to: long, protection: .completeWhenUserInactive, options: [])
        try store.write(Random.bytes(count: 3 * (1 << 20) + 17), to: "a/b/big", protection: .completeUntilFirstUserAuthentication, options: [])
    }

    @Test("restore on a second device (other device directory and passcode): the same tree, classes and contents; verify lists them")
    func secondDevice() throws {
        try withScratch { root in
            let source = try makeStore(in: root, name: "source")
            try Self.populate(source)
            let identity = AgeIdentity.generate()
            let archive = root.appendingPathComponent("backup.age")
            let created = try backUp(source, to: archive, recipients: [identity.recipient!])
            do {
                let target = try makeStore(in: root, name: "target", passcode: "other passcode")
                let restored = try restore(archive, into: target, identities: [identity])
                #expect(try snapshot(target) == snapshot(source))
                #expect(try target.attributesOfItem(atPath: "/").protectionClass == .completeUnlessOpen)
                #expect(restored.entries == created.entries)
            }
            let (input, descriptor) = try fileInput(archive)
            defer { try? descriptor.close() }
            let verified = try Backup.verify(from: input, identities: [identity])
            #expect(verified.entries == created.entries)
            #expect(verified.entries.contains(BackupEntry(path: "classes/complete/file", kind: .file, size: 19, protectionClass: .complete)))
            // Reopened on its own device, after a restart: still all there, under the new passcode.
            let reopened = try ProtectedStore(directory: root.appendingPathComponent("target"),
                                              deviceDirectory: root.appendingPathComponent("target-device"), configuration: testConfiguration)
            try reopened.device.unlock(passcode: "other passcode")
            #expect(try snapshot(reopened) == snapshot(source))
        }
    }

    @Test("age -d | tar -x (the real binaries) gives identical files; tar -tv lists them; the pax header carries the class")
    func readWithoutDpctl() throws {
        try withScratch { root in
            let source = try makeStore(in: root, name: "source")
            try Self.populate(source)
            let (keyFile, recipient) = try ageKeygen(in: root)
            let archive = root.appendingPathComponent("backup.age")
            try backUp(source, to: archive, recipients: [try AgeRecipient(recipient)])
            let tarFile = root.appendingPathComponent("backup.tar")
            let decrypted = try run("/usr/bin/age", ["-d", "-i", keyFile.path, "-o", tarFile.path, archive.path])
            #expect(decrypted.status == 0, "\(decrypted.error)")
            let out = root.appendingPathComponent("out")
            try FileManager.default.createDirectory(at: out, withIntermediateDirectories: true)
            let extracted = try run("/usr/bin/tar", ["-x", "-f", tarFile.path, "-C", out.path])
            #expect(extracted.status == 0, "\(extracted.error)")
            for (path, description) in try snapshot(source) where description.hasPrefix("file") {
                #expect(try Data(contentsOf: out.appendingPathComponent(path)) == source.contents(atPath: path), "\(path)")
            }
            let listing = try run("/usr/bin/tar", ["-tv", "-f", tarFile.path])
            #expect(listing.status == 0)
            #expect(String(decoding: listing.output, as: UTF8.self).contains("classes/complete/file"))
            // GNU tar keeps unknown pax keywords in its own extended-header listing (--pax-option).
            let raw = try Data(contentsOf: tarFile)
            #expect(raw.range(of: Data("DATAPROTECTION.class=complete\n".utf8)) != nil)
        }
    }

    @Test("a pax tar written by the generator, encrypted by age -r and by age -p (on a terminal), restores")
    func archivesMadeByAge() throws {
        try withScratch { root in
            let source = try makeStore(in: root, name: "source")
            try Self.populate(source)
            // The plaintext tar of our generator: our archive, decrypted by age.
            let (keyFile, recipient) = try ageKeygen(in: root)
            let ours = root.appendingPathComponent("ours.age"), tarFile = root.appendingPathComponent("plain.tar")
            try backUp(source, to: ours, recipients: [try AgeRecipient(recipient)])
            #expect(try run("/usr/bin/age", ["-d", "-i", keyFile.path, "-o", tarFile.path, ours.path]).status == 0)
            let (otherKey, otherRecipient) = try ageKeygen(in: root)
            let byAge = root.appendingPathComponent("by-age.age")
            #expect(try run("/usr/bin/age", ["-r", otherRecipient, "-o", byAge.path, tarFile.path]).status == 0)
            let first = try makeStore(in: root, name: "first")
            try restore(byAge, into: first, identities: try identities(in: otherKey))
            #expect(try snapshot(first) == snapshot(source))

            let byPassphrase = root.appendingPathComponent("by-age-p.age")
            try ageWithPassphrase("a passphrase", arguments: ["-p", "-o", byPassphrase.path, tarFile.path], in: root)
            let second = try makeStore(in: root, name: "second")
            let (input, descriptor) = try fileInput(byPassphrase)
            defer { try? descriptor.close() }
            try Backup.restore(from: input, identities: [AgeIdentity(passphrase: Passcode("a passphrase"))], into: second)
            #expect(try snapshot(second) == snapshot(source))
        }
    }

    @Test("a passphrase archive round-trips; the wrong passphrase restores nothing")
    func passphraseRoundTrip() throws {
        try withScratch { root in
            let source = try makeStore(in: root, name: "source")
            try Self.populate(source)
            let archive = root.appendingPathComponent("p.age")
            try backUp(source, to: archive, recipients: [try AgeRecipient(passphrase: Passcode("pass phrase"), workFactor: 12)])
            let target = try makeStore(in: root, name: "target")
            #expect(throws: DataProtectionError.self) {
                try restore(archive, into: target, identities: [AgeIdentity(passphrase: Passcode("wrong"))])
            }
            #expect(try target.contentsOfDirectory(atPath: "/").isEmpty)
            try restore(archive, into: target, identities: [AgeIdentity(passphrase: Passcode("pass phrase"))])
            #expect(try snapshot(target) == snapshot(source))
        }
    }

    @Test("backup while complete is locked: protectedDataUnavailable naming the file, and not a byte written")
    func lockedClass() throws {
        try withScratch { root in
            let source = try makeStore(in: root, name: "source")
            try Self.populate(source)
            // Through the protocol: lock() throws there (and, on later versions, on Device too).
            try (source.device as any DeviceControlling).lock()
            let archive = root.appendingPathComponent("locked.age")
            do {
                try backUp(source, to: archive, recipients: [AgeIdentity.generate().recipient!])
                Issue.record("the backup succeeded while complete was locked")
            } catch let error as DataProtectionError {
                #expect(error.code == .protectedDataUnavailable)
                #expect(error.message.contains("classes/complete/file"), "\(error.message)")
                #expect(!error.message.contains("classes/none/file"), "\(error.message)")
            }
            #expect(try Data(contentsOf: archive).isEmpty)
        }
    }

    @Test("restore into a store that is not empty: fileExists, nothing changed")
    func notEmpty() throws {
        try withScratch { root in
            let source = try makeStore(in: root, name: "source")
            try source.write(Data("x".utf8), to: "x", protection: .none, options: [])
            let identity = AgeIdentity.generate()
            let archive = root.appendingPathComponent("b.age")
            try backUp(source, to: archive, recipients: [identity.recipient!])
            let target = try makeStore(in: root, name: "target")
            try target.write(Data("mine".utf8), to: "mine", protection: .none, options: [])
            #expect { try restore(archive, into: target, identities: [identity]) } throws: { ($0 as? DataProtectionError)?.code == .fileExists }
            #expect(try target.contentsOfDirectory(atPath: "/") == ["mine"])
        }
    }

    @Test("an output that fails mid-archive (or at the header) fails the backup with its own error, every thread joined")
    func failingOutput() throws {
        try withScratch { root in
            let store = try makeStore(in: root, name: "failing")
            try store.write(Random.bytes(count: 6 << 20), to: "big", protection: .complete)
            let recipient = try #require(AgeIdentity.generate().recipient)
            for limit in [0, 100, 3 << 20] {
                let written = Mutex(0)
                let output = BackupOutput { (data: Data) throws(DataProtectionError) in
                    try written.withLock { (total: inout Int) throws(DataProtectionError) in
                        guard total + data.count <= limit else {
                            throw DataProtectionError(.ioFailure, "the disk is full (test)")
                        }
                        total += data.count
                    }
                }
                do throws(DataProtectionError) {
                    try Backup.create(of: store, device: store.device, to: output, recipients: [recipient])
                    Issue.record("a backup into an output that fails after \(limit) bytes succeeded")
                } catch {
                    #expect(error.code == .ioFailure, "\(error)")
                    #expect(error.message.contains("the disk is full"), "\(error)")
                }
                #expect(written.withLock { $0 } <= limit)
            }
            // The store is still usable: a backup into a working output succeeds.
            try backUp(store, to: root.appendingPathComponent("ok.age"), recipients: [recipient])
        }
    }
}
