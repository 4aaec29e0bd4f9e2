import Foundation
import SodiumBridge
import Testing
@testable import DataProtection
@testable import DataProtectionBackup

/// Tampered, truncated and foreign archives restore nothing (`integrityFailure`) and leave
/// the target as it was; a crash during a restore leaves it empty or complete.
@Suite("Backups: tampering, truncation, foreign archives, interrupted restores")
struct BackupTamperTests {
    /// The header's length in `archive` (through the MAC line's newline).
    private func headerLength(_ archive: Data) -> Int {
        let marker = archive.range(of: Data("\n--- ".utf8))!
        return archive[marker.upperBound...].firstIndex(of: UInt8(ascii: "\n"))! + 1
    }

    private func expectRefused(_ bytes: Data, identity: AgeIdentity, root: URL, target: ProtectedStore, _ what: String) throws {
        let file = root.appendingPathComponent("tampered.age")
        try bytes.write(to: file)
        do {
            try restore(file, into: target, identities: [identity])
            Issue.record("\(what): restored")
        } catch let error as DataProtectionError {
            #expect(error.code == .integrityFailure, "\(what): \(error)")
        }
        #expect(try target.contentsOfDirectory(atPath: "/").isEmpty, "\(what): the target is not empty")
    }

    @Test("every byte flipped at positions of the header, each chunk and the last chunk, and truncation at every chunk boundary, restore nothing")
    func tampering() throws {
        try withScratch { root in
            let source = try makeStore(in: root, name: "source")
            try source.write(Random.bytes(count: 300_000), to: "d/big", protection: .complete, options: [])
            try source.write(Data("small".utf8), to: "small", protection: .none, options: [])
            let identity = AgeIdentity.generate()
            let file = root.appendingPathComponent("b.age")
            try backUp(source, to: file, recipients: [identity.recipient!])
            let archive = try Data(contentsOf: file)
            let target = try makeStore(in: root, name: "target")
            let header = headerLength(archive)
            // Header: the version line, the stanza, its body, the MAC line, the nonce.
            var positions = [0, 5, 22, 26, 40, header - 30, header - 2, header, header + 15]
            let sealed = AgeFormat.sealedChunkByteCount
            var chunkStart = header + 16
            var boundaries: [Int] = []
            while chunkStart < archive.count {
                positions += [chunkStart, chunkStart + 1000, min(chunkStart + sealed, archive.count) - 1]
                boundaries.append(chunkStart)
                chunkStart += sealed
            }
            #expect(boundaries.count >= 5)
            for position in positions {
                var tampered = archive
                tampered[position] ^= 0x20
                try expectRefused(tampered, identity: identity, root: root, target: target, "byte \(position) flipped")
            }
            for boundary in boundaries + [header, header + 16 - 1, archive.count - 1] {
                try expectRefused(archive.prefix(boundary), identity: identity, root: root, target: target, "cut at \(boundary)")
            }
            try expectRefused(archive + Data([0]), identity: identity, root: root, target: target, "a byte appended")
            try expectRefused(archive, identity: AgeIdentity.generate(), root: root, target: target, "a foreign identity")
            try expectRefused(Data("not an archive\n".utf8), identity: identity, root: root, target: target, "not age")
            // The untouched archive still restores.
            try restore(file, into: target, identities: [identity])
            #expect(try snapshot(target) == snapshot(source))
        }
    }

    /// An age archive (to `identity`) of the tar that `entries` write.
    private func archive(_ identity: AgeIdentity, root: URL, _ entries: (PaxTarWriter) throws -> Void) throws -> URL {
        let url = root.appendingPathComponent("crafted-\(UUID().uuidString).age")
        let (output, descriptor) = try fileOutput(url)
        defer { try? descriptor.close() }
        let encryptor = try AgeEncryptor(recipients: [identity.recipient!], output: output)
        let tar = PaxTarWriter { (data: Data) throws(DataProtectionError) in try encryptor.write(data) }
        try entries(tar)
        try tar.finish()
        try encryptor.finish()
        return url
    }

    @Test("entries that would escape the store, links, devices, absurd sizes and duplicates restore nothing")
    func foreignEntries() throws {
        try withScratch { root in
            let identity = AgeIdentity.generate()
            let target = try makeStore(in: root, name: "target")
            func one(_ data: Data) -> () throws(DataProtectionError) -> Data? {
                var sent = false
                return { () throws(DataProtectionError) -> Data? in defer { sent = true }; return sent ? nil : data }
            }
            let crafted: [(String, (PaxTarWriter) throws -> Void)] = [
                ("..", { try $0.file("ok", size: 1, protectionClass: ProtectionClass.none, modificationTime: 0, content: one(Data("1".utf8)))
                         try $0.file("a/../../escape", size: 1, protectionClass: ProtectionClass.none, modificationTime: 0, content: one(Data("1".utf8))) }),
                ("absolute", { try $0.file("/etc/passwd", size: 1, protectionClass: ProtectionClass.none, modificationTime: 0, content: one(Data("1".utf8))) }),
                ("duplicate", { try $0.file("same", size: 1, protectionClass: ProtectionClass.none, modificationTime: 0, content: one(Data("1".utf8)))
                                try $0.file("same", size: 1, protectionClass: ProtectionClass.none, modificationTime: 0, content: one(Data("2".utf8))) }),
                ("reserved", { try $0.file(".dataprotection-restore/tree/x", size: 1, protectionClass: ProtectionClass.none, modificationTime: 0, content: one(Data("1".utf8))) }),
            ]
            for (what, entries) in crafted {
                let file = try archive(identity, root: root, entries)
                #expect { try restore(file, into: target, identities: [identity]) } throws: { ($0 as? DataProtectionError)?.code == .integrityFailure }
                #expect(try target.contentsOfDirectory(atPath: "/").isEmpty, "\(what)")
            }
            // A symbolic link, a device and an absurd size: raw ustar headers.
            for (what, type, size) in [("symlink", UInt8(ascii: "2"), UInt64(0)), ("device", UInt8(ascii: "3"), 0), ("huge", UInt8(ascii: "0"), UInt64(1) << 41)] {
                let file = try archive(identity, root: root) { (tar: PaxTarWriter) throws in
                    try tar.file("fine", size: 1, protectionClass: ProtectionClass.none, modificationTime: 0, content: one(Data("1".utf8)))
                    var header = TarFormat.header(name: what, type: .file, size: 0, mode: 0o600, modificationTime: 0)
                    header[156] = type
                    if size > 0 {
                        let records = TarFormat.paxRecords([("size", String(size))])
                        try tar.raw(TarFormat.header(name: "PaxHeaders/huge", type: .paxExtended, size: UInt64(records.count), mode: 0o600, modificationTime: 0))
                        try tar.raw(records + TarFormat.padding(after: UInt64(records.count)))
                    }
                    // Recompute the checksum after changing the type.
                    for index in 148..<156 { header[index] = 0x20 }
                    let sum = String(header.reduce(0) { $0 + Int($1) }, radix: 8)
                    header.replaceSubrange(148..<156, with: Data((String(repeating: "0", count: 6 - sum.count) + sum + "\0 ").utf8))
                    try tar.raw(header)
                }
                #expect { try restore(file, into: target, identities: [identity]) } throws: { ($0 as? DataProtectionError)?.code == .integrityFailure }
                #expect(try target.contentsOfDirectory(atPath: "/").isEmpty, "\(what)")
            }
        }
    }

    @Test("an entry without a class (another tar writer) takes the class it would inherit in the target, never a lower one")
    func entryWithoutClass() throws {
        try withScratch { root in
            let identity = AgeIdentity.generate()
            let target = try makeStore(in: root, name: "target")
            try target.setProtectionClass(.complete, ofItemAtPath: "/")
            let file = try archive(identity, root: root) { (tar: PaxTarWriter) throws in
                var sent = false
                try tar.file("plain", size: 5, protectionClass: nil, modificationTime: 0) { () throws(DataProtectionError) -> Data? in
                    defer { sent = true }
                    return sent ? nil : Data("plain".utf8)
                }
            }
            try restore(file, into: target, identities: [identity])
            #expect(try target.attributesOfItem(atPath: "plain").protectionClass == .complete)
            #expect(try target.attributesOfItem(atPath: "/").protectionClass == .complete)
        }
    }

    @Test("a restore cut before its commit mark leaves the target empty at the next opening; one cut after it is completed")
    func interrupted() throws {
        try withScratch { root in
            let data = root.appendingPathComponent("target"), device = root.appendingPathComponent("target-device")
            do {
                let target = try makeStore(in: root, name: "target")
                try target.createDirectory(atPath: RestoreStaging.tree + "/dir", withIntermediateDirectories: true, protection: .complete)
                try target.write(Data("staged".utf8), to: RestoreStaging.tree + "/dir/file", protection: .complete, options: [])
            }
            do {
                let reopened = try ProtectedStore(directory: data, deviceDirectory: device, configuration: testConfiguration)
                #expect(try reopened.contentsOfDirectory(atPath: "/").isEmpty)
                try reopened.device.unlock(passcode: "1234")
                try reopened.createDirectory(atPath: RestoreStaging.tree + "/dir", withIntermediateDirectories: true, protection: .complete)
                try reopened.write(Data("staged".utf8), to: RestoreStaging.tree + "/dir/file", protection: .complete, options: [])
                try reopened.write(Data("second".utf8), to: RestoreStaging.tree + "/top", protection: .none, options: [])
                try reopened.write(Data(ProtectionClass.complete.rawValue.utf8), to: RestoreStaging.mark, protection: .none, options: [])
                // A crash after the first move.
                try reopened.moveItem(atPath: RestoreStaging.tree + "/dir", toPath: "dir")
            }
            let reopened = try ProtectedStore(directory: data, deviceDirectory: device, configuration: testConfiguration)
            #expect(try reopened.contentsOfDirectory(atPath: "/").sorted() == ["dir", "top"])
            #expect(try reopened.attributesOfItem(atPath: "/").protectionClass == .complete)
            try reopened.device.unlock(passcode: "1234")
            #expect(try reopened.contents(atPath: "dir/file") == Data("staged".utf8))
        }
    }
}
