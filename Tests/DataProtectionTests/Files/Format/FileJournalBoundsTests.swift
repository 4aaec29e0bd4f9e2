import Foundation
import Testing
@testable import DataProtection

/// The reader's bounds on what it will apply or accept (`Keys/file-format.md` §9.2, §10.1):
/// only a key holder can write these, so a violation is tampering or a bug.
@Suite("Journal bounds and name rules")
struct FileJournalBoundsTests {
    static let header = FileHeader(
        protectionClass: .none, chunkShift: 14, fileID: Data(count: 16), generation: 1, length: 3 << 14, allocatedRecords: 3,
        creationTime: 0, ephemeralPublicKey: Data(count: 32), wrapNonce: Data(count: 24), wrappedKey: Data(count: 48))

    static func journal(_ indexes: [UInt64], recordSize: Int? = nil, allocated: UInt64 = 3) -> FileJournal {
        FileJournal(fileID: Data(count: 16), baseGeneration: 1, length: 3 << 14, allocatedRecords: allocated,
                    entries: indexes.map { FileJournal.Entry(index: $0, record: Data(count: recordSize ?? header.recordStride)) })
    }

    @Test("a journal fits only with increasing indexes below its allocation and records no longer than a stride")
    func journalBounds() {
        #expect(Self.journal([0, 2]).fits(Self.header))
        #expect(Self.journal([]).fits(Self.header))
        #expect(!Self.journal([1, 1]).fits(Self.header), "an index twice")
        #expect(!Self.journal([2, 0]).fits(Self.header), "indexes out of order")
        #expect(!Self.journal([3]).fits(Self.header), "an index at the allocation")
        #expect(!Self.journal([0], recordSize: Self.header.recordStride + 1).fits(Self.header), "a record longer than a stride")
        #expect(!Self.journal([0], allocated: 2).fits(Self.header), "a length needing more records than the allocation")
    }

    @Test("a name that decrypts but no writer could have made is refused like one that does not decrypt")
    func impossibleNames() throws {
        let fixture = try StoreFixture()
        defer { fixture.remove() }
        let directory = Data(count: 16)
        for name in ["a/b", "nul\u{0}", ".", "..", String(repeating: "x", count: 150)] {
            let encrypted = try NameCipher.seal(Data(name.utf8), directoryID: directory, device: fixture.device)
            #expect(try NameCipher.decrypt(encrypted, directoryID: directory, device: fixture.device) == nil, "\(name.prefix(10))")
            // And no writer makes one (the key-files fuzzer found encrypt accepting them).
            expectStoreError(.invalidPath, "\(name.prefix(10))") {
                _ = try NameCipher.encrypt(name, directoryID: directory, device: fixture.device)
            }
        }
        let longest = String(repeating: "y", count: 149)
        let encrypted = try NameCipher.encrypt(longest, directoryID: directory, device: fixture.device)
        #expect(try NameCipher.decrypt(encrypted, directoryID: directory, device: fixture.device) == longest)
    }
}
