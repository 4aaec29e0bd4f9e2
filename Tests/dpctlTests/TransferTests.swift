import Foundation
import Testing

/// Streaming transfers: standard input to `put`, `get` to standard output, and a
/// large round trip with flat memory.
@Suite("dpctl transfers")
struct TransferTests {
    @Test("stdin → put and get → stdout round trip a few MiB byte for byte")
    func standardStreams() throws {
        let fixture = try StoreFixture()
        try fixture.initialize()
        let data = deterministicBytes(count: 3 << 20 + 12_345)
        let input = try fixture.localFile("input.bin", data)
        let put = try fixture.run(["put", "-", "blobs/stream.bin", "--class", "complete"], input: input)
        #expect(put.status == 0, "\(put.standardError)")
        #expect(put.standardError.isEmpty)
        #expect(try fixture.run(["stat", "--json", "blobs/stream.bin"]).json()["size"] as? Int == data.count)

        let viaGet = fixture.directory.appendingPathComponent("get.bin")
        let get = try fixture.run(["get", "blobs/stream.bin"], outputFile: viaGet)
        #expect(get.status == 0, "\(get.standardError)")
        #expect(try Data(contentsOf: viaGet) == data)
        let viaCat = fixture.directory.appendingPathComponent("cat.bin")
        #expect(try fixture.run(["cat", "--quiet", "blobs/stream.bin"], outputFile: viaCat).status == 0)
        #expect(try Data(contentsOf: viaCat) == data)
        // An empty standard input stores an empty file.
        #expect(try fixture.run(["put", "-", "empty"]).status == 0)
        #expect(try fixture.run(["stat", "--json", "empty"]).json()["size"] as? Int == 0)
        #expect(try fixture.run(["cat", "empty"]).standardOutput.isEmpty)
    }

    @Test("get -o replaces an existing local file, atomically, and leaves no temporary behind")
    func getReplacesExistingOutput() throws {
        let fixture = try StoreFixture()
        try fixture.initialize()
        let data = deterministicBytes(count: 2 << 20 + 7)
        let input = try fixture.localFile("input.bin", data)
        #expect(try fixture.run(["put", input.path, "f"]).status == 0)
        let output = try fixture.localFile("out.bin", Data("old content that is shorter".utf8))
        let get = try fixture.run(["get", "f", "-o", output.path])
        #expect(get.status == 0, "\(get.standardError)")
        #expect(try Data(contentsOf: output) == data)
        let leftovers = try FileManager.default.contentsOfDirectory(atPath: fixture.directory.path).filter { $0.contains(".dpctl-") }
        #expect(leftovers.isEmpty)
    }

    /// The size of the large round trip: 256 MiB (it takes a few seconds even in debug builds).
    static let largeSize = 256 << 20
    /// The peak resident memory allowed to each dpctl process.
    static let memoryLimit = 64 << 20

    @Test("a 256 MiB put and get -o round trip with flat memory (peak RSS under 64 MiB)")
    func largeRoundTrip() throws {
        let fixture = try StoreFixture()
        try fixture.initialize(passcode: nil)
        let input = fixture.directory.appendingPathComponent("large.in")
        let output = fixture.directory.appendingPathComponent("large.out")
        try writeLargeInput(to: input, size: Self.largeSize)

        let started = ContinuousClock.now
        let put = try runMeasured(fixture, ["put", input.path, "large.bin"])
        let get = try runMeasured(fixture, ["get", "large.bin", "-o", output.path])
        let elapsed = ContinuousClock.now - started
        #expect(put.status == 0)
        #expect(get.status == 0)
        #expect(try sameContents(input, output), "the round trip changed the bytes")
        // Under `.ci/sanitizers` (DP_SANITIZER) shadow memory inflates every RSS: only the bytes are checked.
        if ProcessInfo.processInfo.environment["DP_SANITIZER"] == nil {
            for (name, run) in [("put", put), ("get", get)] {
                #expect(run.peakBytes < Self.memoryLimit, "\(name) peaked at \(run.peakBytes >> 20) MiB")
            }
        }
        print("256 MiB round trip: \(elapsed); peak RSS put \(put.peakBytes >> 10) KiB, get \(get.peakBytes >> 10) KiB")
    }

    /// Deterministic input: a 1 MiB xorshift block, each copy stamped with its index.
    private func writeLargeInput(to url: URL, size: Int) throws {
        var block = deterministicBytes(count: 1 << 20)
        _ = FileManager.default.createFile(atPath: url.path, contents: nil)
        let handle = try FileHandle(forWritingTo: url)
        defer { try? handle.close() }
        for index in 0..<(size >> 20) {
            withUnsafeBytes(of: UInt64(index).littleEndian) { block.replaceSubrange(0..<8, with: $0) }
            try handle.write(contentsOf: block)
        }
    }

    /// Compares two files in 1 MiB pieces.
    private func sameContents(_ a: URL, _ b: URL) throws -> Bool {
        let first = try FileHandle(forReadingFrom: a)
        let second = try FileHandle(forReadingFrom: b)
        defer { try? first.close(); try? second.close() }
        while true {
            let x = try first.read(upToCount: 1 << 20) ?? Data()
            let y = try second.read(upToCount: 1 << 20) ?? Data()
            guard x == y else { return false }
            if x.isEmpty { return true }
        }
    }

    struct Measured {
        var status: Int32
        var peakBytes: Int
    }

    /// Runs dpctl under `/usr/bin/time -f %M` (peak RSS of that process, KiB); without
    /// it, `getrusage(RUSAGE_CHILDREN)` (the largest child so far: an upper bound).
    private func runMeasured(_ fixture: StoreFixture, _ arguments: [String]) throws -> Measured {
        let time = "/usr/bin/time"
        let useTime = FileManager.default.isExecutableFile(atPath: time)
        let process = Process()
        process.executableURL = useTime ? URL(fileURLWithPath: time) : DPCtlRunner.executable
        process.arguments = useTime ? ["-f", "%M", DPCtlRunner.executable.path] + arguments : arguments
        process.environment = fixture.environment(passcode: nil)
        let error = Pipe()
        process.standardError = error
        process.standardOutput = FileHandle.nullDevice
        process.standardInput = FileHandle.nullDevice
        try process.run()
        let errorData = error.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        let text = String(decoding: errorData, as: UTF8.self)
        if useTime {
            let kibibytes = text.split(separator: "\n").last.flatMap { Int($0.trimmingCharacters(in: .whitespaces)) }
            #expect(kibibytes != nil, "no RSS from /usr/bin/time: \(text)")
            return Measured(status: process.terminationStatus, peakBytes: (kibibytes ?? Int.max >> 10) << 10)
        }
        var usage = rusage()
        #if os(Linux)
        getrusage(__rusage_who_t(RUSAGE_CHILDREN.rawValue), &usage)
        return Measured(status: process.terminationStatus, peakBytes: usage.ru_maxrss << 10)  // KiB on Linux
        #else
        getrusage(RUSAGE_CHILDREN, &usage)
        return Measured(status: process.terminationStatus, peakBytes: usage.ru_maxrss)  // bytes on macOS
        #endif
    }
}
