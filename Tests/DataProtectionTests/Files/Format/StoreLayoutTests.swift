import Foundation
import Testing
@testable import DataProtection
import SodiumBridge

/// A store written through the public API, then read back from the raw bytes on
/// disk with the reader of `Keys/file-format.md` (``FormatSpecReader``): the
/// implementation writes what the specification says.
@Suite("Store layout on disk")
struct StoreLayoutTests {
    /// Distinctive plaintext, searched for in every byte on disk.
    static let marker = Data("PLAINTEXT-MARKER-7f3a".utf8)

    static func content(_ length: Int, seed: UInt8) -> Data {
        var data = Data((0..<length).map { UInt8(truncatingIfNeeded: $0 &* 131 &+ Int(seed) &* 7 &+ ($0 >> 9)) })
        var offset = 0
        while offset + marker.count <= length {
            data.replaceSubrange(offset..<offset + marker.count, with: marker)
            offset += 4096
        }
        return data
    }

    struct Written {
        let path: String
        let protectionClass: ProtectionClass
        var content: Data
    }

    @Test("Files and directories on disk follow file-format.md")
    func layout() throws {
        try withFormatScratchDirectory { directory in
            let store = try ProtectedStore(directory: directory, clock: VirtualClock(),
                                           configuration: DeviceConfiguration(passcodeCost: .minimal))
            let device = store.device
            try device.unlock()
            var files = [
                Written(path: "Documents/Secret Plans.txt", protectionClass: .complete, content: Self.content(3 * 16384 + 1000, seed: 1)),
                Written(path: "Documents/classb.dat", protectionClass: .completeUnlessOpen, content: Self.content(16385, seed: 2)),
                Written(path: "notes-top-level.bin", protectionClass: .none, content: Self.content(1, seed: 3)),
                Written(path: "empty-file.txt", protectionClass: .completeUntilFirstUserAuthentication, content: Data()),
                Written(path: "Documents/exactly-one-chunk", protectionClass: .completeWhenUserInactive, content: Self.content(16384, seed: 4)),
            ]
            let before = Date()
            for file in files {
                try store.write(file.content, to: file.path, protection: ProtectionChoice(file.protectionClass))
            }
            let keys = try FormatSpecKeys(device: device)
            let metadataKey = try device.withMetadataKey { SecureBytes(copying: $0) }
            let root = directory.appendingPathComponent("files")

            // Every file as a whole-file write leaves it (§8.1).
            var onDisk = try decryptTree(root, metadataKey: metadataKey)
            #expect(Set(onDisk.keys) == Set(files.map(\.path)), "the decrypted names on disk are the store's paths")
            for file in files {
                let url = try #require(onDisk[file.path])
                let raw = try Data(contentsOf: url)
                let opening = FormatSpecReader.open(raw, keys: keys)
                #expect(opening.failure == nil, "\(file.path): refused at \(opening.failure?.rawValue ?? "-")")
                #expect(opening.plaintext == file.content, "\(file.path): content")
                let header = try #require(opening.current?.header)
                #expect(opening.current?.slot == 0 && header.generation == 1, "\(file.path): generation 1 in slot 0")
                #expect(raw.subdata(in: 512..<992) == Data(count: 480), "\(file.path): slot 1 is never written")
                #expect(raw.subdata(in: 480..<512) == raw.subdata(in: 992..<1024) && raw.subdata(in: 480..<512) != Data(count: 32),
                        "\(file.path): both place records bind the file's place (§10.2)")
                #expect(header.classByte == FormatSpec.classByte(file.protectionClass))
                #expect(header.shift == 14, "16 KiB chunks")
                #expect(header.reserved == 0 && header.padding.allSatisfy { $0 == 0 })
                #expect(header.allocated == header.recordCount, "allocated = records")
                #expect(UInt64(raw.count) == header.committedSize, "\(file.path): nothing after the last record")
                #expect(header.recordCount == UInt64((file.content.count + 16383) / 16384))
                let created = Date(timeIntervalSince1970: Double(header.creationTime) / 1e9)
                #expect(abs(created.timeIntervalSince(before)) < 600, "creation time: nanoseconds since the epoch")
                #expect((header.ephemeralPublicKey == Data(count: 32)) == (file.protectionClass != .completeUnlessOpen),
                        "an ephemeral key for class B only")
                #expect(raw.range(of: Self.marker) == nil, "\(file.path): no plaintext on disk")
            }
            let fileIDs = Set(try files.map { try FormatSpecSlot(Data(contentsOf: try #require(onDisk[$0.path])).prefix(512)).fileID })
            #expect(fileIDs.count == files.count, "every file has its own id")

            // A handle edit: an overwrite (journaled) and a growth (allocated first: more records than a
            // journaled growth takes), then a sync (§8.2).
            let plansURL = try #require(onDisk["Documents/Secret Plans.txt"])
            let original = FormatSpecSlot(try Data(contentsOf: plansURL).prefix(512))
            let handle = try store.openFile(atPath: "Documents/Secret Plans.txt")
            try handle.write(contentsOf: Data(repeating: 0xAB, count: 10), atOffset: 100)
            let appended = Self.content(300_000, seed: 5)  // 19 records: past a journaled growth's 256 KiB
            try handle.write(contentsOf: appended, atOffset: UInt64(files[0].content.count))
            try handle.synchronize()
            try handle.close()
            files[0].content.replaceSubrange(100..<110, with: Data(repeating: 0xAB, count: 10))
            files[0].content.append(appended)
            var raw = try Data(contentsOf: plansURL)
            var opening = FormatSpecReader.open(raw, keys: keys)
            #expect(opening.plaintext == files[0].content)
            #expect(opening.current?.slot == 0 && opening.current?.header.generation == 3,
                    "allocation header (generation 2, slot 1), then the commit (generation 3, slot 0)")
            let previous = FormatSpecSlot(raw.subdata(in: 512..<1024))
            #expect(previous.generation == 2 && previous.length == 3 * 16384 + 1000 && previous.allocated == 22,
                    "slot 1: the old length with the new allocation")
            #expect(previous.fileID == original.fileID && previous.wrappedKey == original.wrappedKey,
                    "a flush does not rewrap the file key")
            #expect(UInt64(raw.count) == opening.current?.header.committedSize)
            #expect(try FileManager.default.contentsOfDirectory(atPath: plansURL.deletingLastPathComponent().path)
                .allSatisfy { !$0.hasSuffix(".j") && !$0.hasPrefix(".tmp-") }, "no journal or debris left")

            // A class change rewraps both slots (§8.3).
            try store.setProtectionClass(.none, ofItemAtPath: "Documents/Secret Plans.txt")
            raw = try Data(contentsOf: plansURL)
            opening = FormatSpecReader.open(raw, keys: keys)
            #expect(opening.plaintext == files[0].content)
            let slots = [FormatSpecSlot(raw.subdata(in: 0..<512)), FormatSpecSlot(raw.subdata(in: 512..<1024))]
            #expect(slots.map(\.classByte) == [5, 5], "both slots in the new class")
            #expect(Set(slots.map(\.generation)) == [4, 5])
            #expect(slots.allSatisfy { $0.wrapNonce != original.wrapNonce }, "rewrapped under a fresh nonce")
            #expect(slots.allSatisfy { FormatSpecReader.unwrap($0, keys: keys) != nil })

            // A shrink: commit, truncate, then the allocation follows (§8.2 step 6).
            let shrinking = try store.openFile(atPath: "Documents/Secret Plans.txt")
            try shrinking.truncate(atOffset: 1000)
            try shrinking.close()
            files[0].content = files[0].content.prefix(1000)
            raw = try Data(contentsOf: plansURL)
            opening = FormatSpecReader.open(raw, keys: keys)
            #expect(opening.plaintext == files[0].content)
            #expect(opening.current?.header.allocated == 1 && raw.count == 1024 + 1040)

            // Names and dpdir files (§10, §11).
            onDisk = try decryptTree(root, metadataKey: metadataKey)
            #expect(Set(onDisk.keys) == Set(files.map(\.path)))
            let plaintextNames = ["Documents", "Secret", "Plans", "classb", "notes", "top-level", "empty-file", "exactly-one-chunk", ".txt", ".bin", ".dat"]
            let everything = try FileManager.default.subpathsOfDirectory(atPath: directory.path)
            for path in everything {
                for component in path.split(separator: "/") {
                    for name in plaintextNames {
                        #expect(!component.contains(name), "\(path) reveals \(name)")
                    }
                }
            }
            for file in files {
                #expect(try store.contents(atPath: file.path) == file.content)
            }
        }
    }

    /// Walks the store tree from `root`: checks every `dpdir` (§11.2), decrypts every
    /// entry name (§10) and checks modes; returns the store paths of the files and their URLs.
    private func decryptTree(_ root: URL, metadataKey: SecureBytes, prefix: String = "") throws -> [String: URL] {
        var found: [String: URL] = [:]
        #expect(try mode(of: root) == 0o700, "\(root.lastPathComponent): directories are 0700")
        let dpdir = try Data(contentsOf: root.appendingPathComponent("dpdir"))
        #expect(try mode(of: root.appendingPathComponent("dpdir")) == 0o600)
        let directory = try #require(FormatSpecNames.decodeDirectory(metadataKey: metadataKey, dpdir), "dpdir of /\(prefix)")
        // The root also holds the store's identity (§11.3).
        for entry in try FileManager.default.contentsOfDirectory(atPath: root.path)
        where entry != "dpdir" && !(prefix.isEmpty && entry == ".dpstore") {
            #expect(!entry.hasPrefix("."), "no debris: \(entry)")
            let name = try #require(FormatSpecNames.decrypt(metadataKey: metadataKey, directoryID: directory.id, encoded: entry),
                                    "\(entry) decrypts")
            #expect(entry.utf8.count == FormatSpecNames.encodedLength(nameByteCount: name.count))
            let path = prefix + String(decoding: name, as: UTF8.self)
            let url = root.appendingPathComponent(entry)
            var isDirectory: ObjCBool = false
            _ = FileManager.default.fileExists(atPath: url.path, isDirectory: &isDirectory)
            if isDirectory.boolValue {
                found.merge(try decryptTree(url, metadataKey: metadataKey, prefix: path + "/")) { $1 }
            } else {
                #expect(try mode(of: url) == 0o600, "\(path): files are 0600")
                found[path] = url
            }
        }
        return found
    }

    private func mode(of url: URL) throws -> Int {
        let attributes = try FileManager.default.attributesOfItem(atPath: url.path)
        return (attributes[.posixPermissions] as? NSNumber)?.intValue ?? -1
    }
}
