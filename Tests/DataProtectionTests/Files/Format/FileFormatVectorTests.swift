import Foundation
import SystemPackage
import Testing
@testable import DataProtection
import SodiumBridge

/// Runs the known-answer vectors of `Keys/vectors/files` and `Keys/vectors/names`
/// (see `Keys/README.md` and `Keys/file-format.md`).
///
/// The vectors come from an independent implementation of the format
/// (`Keys/vectors/generate_files.py`). Each file vector is opened twice:
///
/// - step by step, as `file-format.md` §7 says (``FormatSpecReader``), with the
///   implementation's own pieces (`FileHeader.parse`, `FileKeys`,
///   `ChunkRecords.open`) cross-checked at every step, so that a refusal is
///   seen at the step the vector names;
/// - through the real code path: a `Device` booted from a keybag that holds the
///   vector's class keys, `OpenFile.open` and `OpenFile.read`.
@Suite("File format vectors")
struct FileFormatVectorTests {
    // MARK: - Protected files

    @Test("Protected-file vector", arguments: FormatVectorFile.names(in: "files"))
    func protectedFile(_ name: String) throws {
        let vector = try FormatVectorFile(name)
        let expect = try vector.field("expect")
        let classByte = try #require(FormatSpec.classByte(named: try vector.field("class")), "unknown class")
        let keys = try FormatSpecKeys(vector: vector)
        if classByte == FormatSpec.classB {
            #expect(X25519.publicKey(for: keys.classBSecret) == keys.classBPublic, "class-b-public is X25519Base(class-b-secret)")
        }

        // Step by step.
        let opening = FormatSpecReader.open(vector.payload, keys: keys)
        switch expect {
        case "success":
            #expect(opening.failure == nil, "refused at \(opening.failure?.rawValue ?? "-")")
            let current = try #require(opening.current)
            #expect(current.slot == Int(try vector.field("current-slot")))
            #expect(current.header.generation == UInt64(try vector.field("generation")))
            #expect(current.header.classByte == classByte, "the current header's class")
            #expect(opening.plaintext == (try vector.hex("plaintext")))
            #expect(current.header.length == UInt64(try vector.hex("plaintext").count))
            if current.header.padding.allSatisfy({ $0 == 0 }) {
                // The implementation encodes the slot it parsed byte for byte.
                let parsed = try #require(FileHeader.parse(slot: current.header.bytes))
                let fileKey = try #require(FormatSpecReader.unwrap(current.header, keys: keys))
                let fileKeys = FileKeys(fileKey: fileKey)
                defer { fileKeys.wipe() }
                #expect(parsed.header.encodedSlot(macKey: fileKeys.macKey) == current.header.bytes.prefix(FileHeader.slotFieldsByteCount))
            }
        case "integrityFailure":
            let step = try #require(FormatSpecStep(rawValue: try vector.field("fails-at")), "unknown fails-at")
            #expect(opening.failure == step,
                    "refused at \(opening.failure?.rawValue ?? "no step (it opened)"); the vector expects \(step)")
            #expect(opening.plaintext == nil)
        default:
            Issue.record("\(name): unknown expect \(expect)")
        }

        // The real code path.
        try withFormatScratchDirectory { directory in
            var slotKeys: [KeybagSlot: Data] = [:]
            if classByte == FormatSpec.classB {
                slotKeys[.completeUnlessOpenSecret] = try vector.hex("class-b-secret")
            } else {
                slotKeys = FormatVectorDevice.symmetricClasses(try vector.hex("class-key"))
            }
            let device = try FormatVectorDevice.boot(at: directory.appendingPathComponent("device"), keys: slotKeys)
            let path = directory.appendingPathComponent("file")
            try vector.payload.write(to: path)
            let content: Data
            do throws(DataProtectionError) {
                let file = try OpenFile.open(at: FilePath(path.path), device: device)
                #expect(FileHeader.classByte(file.protectionClass) == opening.current?.header.classByte)
                content = try file.read(at: 0, count: Int(file.currentSize))
            } catch {
                #expect(expect == "integrityFailure" && error.code == .integrityFailure,
                        "OpenFile threw \(error); the vector expects \(expect)")
                return
            }
            #expect(expect == "success", "OpenFile read \(content.count) bytes; the vector expects \(expect)")
            if expect == "success" {
                #expect(content == (try vector.hex("plaintext")))
            }
            #expect(try Data(contentsOf: path) == vector.payload, "opening and reading leave the file as it was")
        }
    }

    // MARK: - Names and dpdir

    @Test("Name vector", arguments: FormatVectorFile.names(in: "names"))
    func encryptedName(_ name: String) throws {
        let vector = try FormatVectorFile(name)
        let expect = try vector.field("expect")
        let failsAt = vector.fields["fails-at"]
        let metadataKeyBytes = try vector.hex("metadata-key")
        let metadataKey = SecureBytes.formatVector(metadataKeyBytes)
        let directoryBytes = try vector.hex("dpdir")
        let encoded = try #require(String(data: vector.payload, encoding: .utf8), "the payload is ASCII")
        let plain = try vector.fields["name"].map { Data($0.utf8) } ?? vector.hex("name-hex")
        #expect(expect == "success" ? failsAt == nil : ["dpdir", "place", "name"].contains(failsAt))
        let place = Place(directoryID: try vector.hex("dpdir-parent-id"),
                          name: try #require(String(data: try vector.hex("dpdir-name-hex"), encoding: .utf8)))

        try withFormatScratchDirectory { directory in
            let device = try FormatVectorDevice.boot(at: directory, keys: [.metadata: metadataKeyBytes])

            // The dpdir, by the implementation and by §11.2.
            let spec = FormatSpecNames.decodeDirectory(metadataKey: metadataKey, directoryBytes)
            var metadata: DirectoryMetadata?
            do throws(DataProtectionError) {
                metadata = try DirectoryMetadata.decode(directoryBytes, device: device)
            } catch {
                #expect(failsAt == "dpdir" && error.code == .integrityFailure, "DirectoryMetadata.decode threw \(error)")
            }
            #expect((spec != nil) == (metadata != nil), "DirectoryMetadata.decode and §11.2 disagree")
            if failsAt == "dpdir" {
                #expect(metadata == nil, "a dpdir the vector calls bad was accepted")
                return
            }
            let directoryMetadata = try #require(metadata)
            let bound = try directoryMetadata.isBound(to: place, device: device)
            let specBound = spec?.places.contains(FormatSpecNames.placeTag(
                metadataKey: metadataKey, kind: "DPPD", id: directoryMetadata.id, directoryID: place.directoryID,
                name: Data(place.name.utf8))) ?? false
            #expect(bound == (failsAt != "place"), "the dpdir's place binding")
            #expect(specBound == bound, "DirectoryMetadata.isBound and §10.2 disagree")
            if failsAt == "place" { return }
            let id = try vector.hex("directory-id")
            #expect(directoryMetadata.id == id)
            #expect(spec?.id == id)
            if expect == "success" {
                let classByte = try #require(UInt8(try vector.field("directory-class")))
                #expect(directoryMetadata.protectionClass.map(FileHeader.classByte) ?? 0 == classByte)
                #expect(try directoryMetadata.encoded(device: device) == directoryBytes, "the dpdir encoding is canonical")
            }

            // The name.
            let decrypted = try NameCipher.decrypt(encoded, directoryID: id, device: device)
            let specDecrypted = FormatSpecNames.decrypt(metadataKey: metadataKey, directoryID: id, encoded: encoded)
            if expect == "success" {
                let text = try #require(String(data: plain, encoding: .utf8))
                #expect(decrypted == text)
                #expect(specDecrypted == plain)
                #expect(try NameCipher.encrypt(text, directoryID: id, device: device) == encoded)
                #expect(try FormatSpecNames.encrypt(metadataKey: metadataKey, directoryID: id, name: plain) == encoded)
                #expect(encoded.utf8.count == FormatSpecNames.encodedLength(nameByteCount: plain.count))
            } else {
                #expect(specDecrypted == nil)
                #expect(decrypted == nil, "\(encoded) decrypted to \(decrypted ?? "")")
            }
        }
    }

    @Test("Place vector", arguments: FormatVectorFile.names(in: "places"))
    func placeRecords(_ name: String) throws {
        let vector = try FormatVectorFile(name)
        let metadataKeyBytes = try vector.hex("metadata-key")
        let fileID = try vector.hex("file-id")
        let directoryID = try vector.hex("directory-id")
        let nameBytes = try vector.hex("name-hex")
        let place = Place(directoryID: directoryID, name: try #require(String(data: nameBytes, encoding: .utf8)))
        let expected = try vector.field("expect") == "success"
        #expect(vector.payload.count == 64)
        let records = [vector.payload.prefix(32), vector.payload.suffix(32)].map { Data($0) }
        try withFormatScratchDirectory { directory in
            let device = try FormatVectorDevice.boot(at: directory, keys: [.metadata: metadataKeyBytes])
            // The implementation, through the real record reader on a file holding the records.
            var region = Data(count: FileHeader.regionByteCount)
            region.replaceSubrange(480..<512, with: records[0])
            region.replaceSubrange(992..<1024, with: records[1])
            let path = directory.appendingPathComponent("file")
            try region.write(to: path)
            let file = try DataFileDescriptor.open(FilePath(path.path), fileSystem: PosixFileSystem())
            defer { file.close() }
            let outcome = Result<Void, DataProtectionError> { () throws(DataProtectionError) in
                try FilePlaceRecords.verify(file, fileID: fileID, place: place, device: device)
            }
            switch outcome {
            case .success: #expect(expected, "the records were accepted")
            case .failure(let error): #expect(!expected && error.code == .integrityFailure, "\(error)")
            }
            // §10.2, independently.
            let metadataKey = SecureBytes.formatVector(metadataKeyBytes)
            let tag = FormatSpecNames.placeTag(metadataKey: metadataKey, kind: "DPPF", id: fileID,
                                               directoryID: directoryID, name: nameBytes)
            #expect(records.contains(tag) == expected)
        }
    }

    // MARK: - The store's identity (`.dpstore`, `store-id`)

    @Test("Store identity vector", arguments: FormatVectorFile.names(in: "identity"))
    func storeIdentity(_ name: String) throws {
        let vector = try FormatVectorFile(name)
        let expect = try vector.field("expect")
        try withFormatScratchDirectory { directory in
            // The same bytes in the data directory (`.dpstore`) and the device directory (`store-id`).
            for fileName in [StoreIdentity.fileName, StoreIdentity.deviceFileName] {
                let path = directory.appendingPathComponent(fileName)
                try vector.payload.write(to: path)
                var read: (id: Data, version: UInt8)?
                do throws(DataProtectionError) {
                    read = try StoreIdentity.read(FilePath(path.path), fileSystem: PosixFileSystem())
                } catch {
                    #expect(expect == "integrityFailure" && error.code == .integrityFailure, "\(fileName): \(error)")
                    continue
                }
                try #require(expect == "success", "\(fileName) was read; the vector expects \(expect)")
                let identity = try #require(read)
                #expect(identity.id == (try vector.hex("store-id")), "\(fileName)")
                #expect(identity.version == UInt8(try vector.field("layout")), "\(fileName)")
                if identity.version == StoreIdentity.version {
                    #expect(StoreIdentity.encode(identity.id) == vector.payload, "the encoding is the vector's")
                }
            }
            // What tools read to find the device directory.
            if expect == "success" {
                #expect(try ProtectedStore.identifier(ofDataDirectory: directory) == (try vector.field("store-id")))
            } else {
                #expect(throws: DataProtectionError.self) { try ProtectedStore.identifier(ofDataDirectory: directory) }
            }
        }
    }

    // MARK: - The folders themselves

    /// An emptied folder would make the parameterised tests above pass vacuously.
    @Test("Vector folders hold every kind of vector")
    func foldersAreComplete() throws {
        let files = try FormatVectorFile.names(in: "files").map { try FormatVectorFile($0) }
        #expect(files.count >= 50, "\(FormatVectorFile.folder.path)/files holds \(files.count) vectors")
        let steps = Set(files.compactMap { $0.fields["fails-at"] })
        #expect(steps == Set(FormatSpecStep.allCases.map(\.rawValue)), "every step of §7 has a vector: \(steps)")
        let classes = Set(files.filter { $0.fields["expect"] == "success" }.compactMap { $0.fields["class"] })
        #expect(classes.count == 5, "a success vector for every class: \(classes)")
        let names = try FormatVectorFile.names(in: "names").map { try FormatVectorFile($0) }
        #expect(names.count >= 15)
        #expect(Set(names.compactMap { $0.fields["fails-at"] }) == ["dpdir", "place", "name"])
        let places = try FormatVectorFile.names(in: "places").map { try FormatVectorFile($0) }
        #expect(places.count >= 10)
        #expect(Set(places.map { $0.fields["expect"] }) == ["success", "integrityFailure"])
        #expect(names.contains { $0.fields["expect"] == "success" })
        let identities = try FormatVectorFile.names(in: "identity").map { try FormatVectorFile($0) }
        #expect(identities.count >= 5)
        #expect(Set(identities.compactMap { $0.fields["layout"] }) == ["1", "2"])
    }
}
