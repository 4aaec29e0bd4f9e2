import Foundation
import Testing
@testable import DataProtection

/// Large writes (sealed straight from the caller's data, many chunks per commit)
/// mixed with small cached ones, against an in-memory model.
@Suite struct LargeWriteTests {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("dp-large-writes-\(UUID())")

    func makeStore() throws -> ProtectedStore {
        let store = try ProtectedStore(directory: directory, clock: VirtualClock(),
                                       configuration: DeviceConfiguration(passcodeCost: .minimal))
        try store.device.unlock()
        return store
    }

    static func bytes(_ count: Int, using generator: inout some RandomNumberGenerator) -> Data {
        var words = (0..<(count + 7) / 8).map { _ in generator.next() as UInt64 }
        return words.withUnsafeMutableBytes { Data($0.prefix(count)) }
    }

    /// A copy of `data` whose indices do not start at 0.
    static func slice(_ data: Data) -> Data {
        (Data([0xEE, 0xEE, 0xEE]) + data).dropFirst(3)
    }

    @Test func largeAndSmallWritesMatchTheModel() throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        var generator = SystemRandomNumberGenerator()
        try matchTheModel(using: &generator)
    }

    /// Seeds that once read a stale chunk: a large write committed in slices, the file's partial
    /// last chunk cached (stale) in the first slice's commit and kept as committed for reads.
    @Test(arguments: [10, 36] as [UInt64])
    func seededWritesMatchTheModel(seed: UInt64) throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        var generator = SeededGenerator(seed: seed)
        try matchTheModel(using: &generator)
    }

    /// 60 steps of large writes, small writes, truncations and synchronizations, each followed
    /// by reads checked against an in-memory model; then the whole file.
    func matchTheModel(using generator: inout some RandomNumberGenerator) throws {
        let store = try makeStore()
        let handle = try store.openFile(atPath: "f", create: true)
        let chunk = 1 << Int(ProtectedStore.defaultChunkShift)
        var model = Data()
        for step in 0..<60 {
            switch step % 6 {
            case 0, 1, 2:
                // Large: many whole chunks, chunk-aligned or not, sometimes past the end.
                let aligned = Bool.random(using: &generator)
                var offset = Int.random(in: 0...(model.count + 3 * chunk), using: &generator)
                if aligned { offset -= offset % chunk }
                var count = Int.random(in: (32 * chunk)...(150 * chunk), using: &generator)
                if Bool.random(using: &generator) { count -= count % chunk }
                let data = Self.bytes(count, using: &generator)
                try handle.write(contentsOf: Bool.random(using: &generator) ? Self.slice(data) : data, atOffset: UInt64(offset))
                if offset + count > model.count { model.append(Data(count: offset + count - model.count)) }
                model.replaceSubrange(offset..<offset + count, with: data)
            case 3:
                let offset = Int.random(in: 0...(model.count + chunk), using: &generator)
                let data = Self.bytes(Int.random(in: 1...(3 * chunk), using: &generator), using: &generator)
                try handle.write(contentsOf: data, atOffset: UInt64(offset))
                if offset + data.count > model.count { model.append(Data(count: offset + data.count - model.count)) }
                model.replaceSubrange(offset..<offset + data.count, with: data)
            case 4:
                let size = Int.random(in: 0...(model.count + chunk), using: &generator)
                try handle.truncate(atOffset: UInt64(size))
                if size < model.count { model.removeSubrange(size...) } else { model.append(Data(count: size - model.count)) }
            default:
                if Bool.random(using: &generator) { try handle.synchronize() }
            }
            if model.count > 12 << 20 {
                try handle.truncate(atOffset: UInt64(model.count / 3))
                model.removeSubrange((model.count / 3)...)
            }
            #expect(try handle.size() == UInt64(model.count), "step \(step)")
            for _ in 0..<4 {
                let start = Int.random(in: 0...model.count, using: &generator)
                let count = Int.random(in: 0...(Bool.random(using: &generator) ? 5000 : 3 * chunk), using: &generator)
                let got = try handle.read(atOffset: UInt64(start), upToCount: count)
                #expect(got == model.subdata(in: start..<min(model.count, start + count)), "step \(step)")
            }
        }
        try handle.close()
        #expect(try store.contents(atPath: "f") == model)
    }

    @Test func largeOverwriteOfCommittedContentThenReopen() throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let store = try makeStore()
        let chunk = 1 << Int(ProtectedStore.defaultChunkShift)
        var generator = SystemRandomNumberGenerator()
        var model = Self.bytes(200 * chunk + 123, using: &generator)
        try store.write(model, to: "f")
        let handle = try store.openFile(atPath: "f")
        // Cached small writes inside and around the region a large write then replaces.
        try handle.write(contentsOf: Data("small".utf8), atOffset: UInt64(10 * chunk + 7))
        try handle.write(contentsOf: Data("kept".utf8), atOffset: UInt64(150 * chunk))
        model.replaceSubrange(10 * chunk + 7..<10 * chunk + 12, with: Data("small".utf8))
        model.replaceSubrange(150 * chunk..<150 * chunk + 4, with: Data("kept".utf8))
        let big = Self.bytes(100 * chunk + 999, using: &generator)
        try handle.write(contentsOf: big, atOffset: UInt64(5 * chunk + 1))
        model.replaceSubrange(5 * chunk + 1..<5 * chunk + 1 + big.count, with: big)
        #expect(try handle.read(atOffset: 0, upToCount: model.count + 10) == model)
        try handle.close()
        #expect(try store.contents(atPath: "f") == model)
        let reopened = try store.fileHandle(forReadingAtPath: "f")
        #expect(try reopened.readToEnd() == model)
        try reopened.close()
    }

    @Test func streamedPutOfUnevenPieces() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let store = try makeStore()
        let chunk = 1 << Int(ProtectedStore.defaultChunkShift)
        var generator = SystemRandomNumberGenerator()
        var pieces: [Data] = []
        for _ in 0..<40 {
            let count = [1, chunk - 1, chunk, chunk + 1, 3 * chunk, 5 * chunk + 17, 70 * chunk][Int.random(in: 0..<7, using: &generator)]
            let data = Self.bytes(count, using: &generator)
            pieces.append(Bool.random(using: &generator) ? Self.slice(data) : data)
        }
        var iterator = pieces.makeIterator()
        try store.write(to: "put", from: { iterator.next() })
        let whole = pieces.reduce(Data(), +)
        #expect(try await store.contents(atPath: "put") == whole)
        var streamed = Data()
        for try await piece in store.chunks(atPath: "put", chunkSize: 100_000) { streamed.append(piece) }
        #expect(streamed == whole)
    }
}
