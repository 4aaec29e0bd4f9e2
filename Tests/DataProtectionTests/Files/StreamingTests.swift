import Foundation
import Testing
@testable import DataProtection

@Suite struct StreamingTests {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("dp-streaming-\(UUID())")

    func makeStore() throws -> ProtectedStore {
        let store = try ProtectedStore(directory: directory, clock: VirtualClock(),
                                       configuration: DeviceConfiguration(passcodeCost: .minimal))
        try store.device.unlock()
        return store
    }

    @Test("chunks and lines stream a file back exactly, whatever the piece boundaries")
    func chunksAndLines() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let store = try makeStore()
        let lines = (0..<5000).map { "line \($0) " + String(repeating: "x", count: $0 % 97) }
        let text = lines.joined(separator: "\n") + "\r\nlast"
        try await store.write(Data(text.utf8), to: "Documents/lines.txt")
        var joined = Data()
        for try await piece in store.chunks(atPath: "Documents/lines.txt", chunkSize: 7777) {
            #expect(piece.count <= 7777)
            joined.append(piece)
        }
        #expect(joined == Data(text.utf8))
        var read: [String] = []
        for try await line in store.lines(atPath: "Documents/lines.txt") { read.append(line) }
        #expect(read == Array(lines.dropLast()) + [lines.last!, "last"])
    }

    @Test("a streamed write from an AsyncSequence is atomic and complete")
    func asyncSequenceWrite() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let store = try makeStore()
        let pieces = (0..<40).map { Data(repeating: UInt8($0), count: 10_000 + $0) }
        let stream = AsyncStream<Data> { continuation in
            for piece in pieces { continuation.yield(piece) }
            continuation.finish()
        }
        try await store.write(contentsOf: stream, to: "tmp/streamed.bin", protection: .complete)
        #expect(try await store.contents(atPath: "tmp/streamed.bin") == pieces.reduce(Data(), +))
        #expect(try store.attributesOfItem(atPath: "tmp/streamed.bin").protectionClass == .complete)
    }

    @Test("a failing sequence stores nothing: its DataProtectionError as it is, another error as ioFailure naming it")
    func failingSequenceWrite() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let store = try makeStore()
        try await store.write(Data("old".utf8), to: "f")
        struct Unplugged: Error, CustomStringConvertible { var description: String { "the cable was unplugged" } }
        let ownError = DataProtectionError(.integrityFailure, "The source was tampered with.")
        for failure in [ownError as any Error, Unplugged()] {
            let stream = AsyncThrowingStream<Data, any Error> { continuation in
                continuation.yield(Data(repeating: 1, count: 100_000))
                continuation.finish(throwing: failure)
            }
            do throws(DataProtectionError) {
                try await store.write(contentsOf: stream, to: "f")
                Issue.record("no error")
            } catch {
                if failure is Unplugged {
                    #expect(error.code == .ioFailure && error.message.contains("the cable was unplugged"), "\(error)")
                } else {
                    #expect(error == ownError)
                }
            }
            #expect(try await store.contents(atPath: "f") == Data("old".utf8))
        }
    }

    @Test("the chunks and lines of a file fail with a typed DataProtectionError")
    func typedStreamingErrors() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let store = try makeStore()
        do {
            for try await _ in store.chunks(atPath: "missing") {}
            Issue.record("no error")
        } catch {
            #expect(error.code == .fileNotFound)  // `error` is a DataProtectionError: no cast
        }
        do {
            for try await _ in store.lines(atPath: "missing") {}
            Issue.record("no error")
        } catch {
            #expect(error.code == .fileNotFound)
        }
    }

    @Test("streaming stops with protectedDataUnavailable once a complete file's key is gone")
    func streamingStopsAtLock() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let store = try makeStore()
        try await store.write(Data(count: 200_000), to: "a.bin", protection: .complete)
        var iterator = store.chunks(atPath: "a.bin", chunkSize: 50_000).makeAsyncIterator()
        #expect(try await iterator.next()?.count == 50_000)
        try store.device.lock()
        await #expect(throws: DataProtectionError.self) { _ = try await iterator.next() }
    }

    @Test("Codable round trip in JSON and property list")
    func codable() throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        struct Settings: Codable, Equatable { var name: String; var count: Int; var tags: [String] }
        let store = try makeStore()
        let value = Settings(name: "ünïcode", count: 42, tags: ["a", "b"])
        for format in [ProtectedCodingFormat.json, .propertyList] {
            try store.encode(value, to: "Library/Application Support/settings", format: format, protection: .completeUnlessOpen)
            #expect(try store.decode(Settings.self, from: "Library/Application Support/settings", format: format) == value)
        }
        #expect(throws: DataProtectionError.self) { try store.decode([Int].self, from: "Library/Application Support/settings") }
    }

    @Test("async positional reads and writes through a handle")
    func asyncHandleIO() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let store = try makeStore()
        let handle = try store.openFile(atPath: "io.bin", create: true)
        try await handle.writeData(Data("0123456789".utf8), atOffset: 100)
        #expect(try await handle.readData(atOffset: 98, upToCount: 5) == Data([0, 0]) + Data("012".utf8))
        #expect(try handle.size() == 110)
        try handle.close()
    }

    @Test("sandbox directories appear on first use")
    func sandbox() throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let store = try makeStore()
        #expect(try store.contentsOfDirectory(atPath: "/").isEmpty)
        for directory in SandboxDirectory.allCases { try store.path(for: directory) }
        #expect(try store.contentsOfDirectory(atPath: "/") == ["Documents", "Library", "tmp"])
        #expect(try store.contentsOfDirectory(atPath: "Library") == ["Application Support", "Caches"])
    }
}
