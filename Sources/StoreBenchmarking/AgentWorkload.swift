import DataProtection
import DataProtectionAgent
import Foundation
import SystemPackage

/// The store through an agent next to the same store in process, in one run: whole-file
/// put and get of a local file (the agent reads and writes the caller's descriptor, as
/// `dpctl put` and `get` do; in process, the same file streamed through the store), and
/// 4 KiB `get` and `stat` operations per second with 1 and 16 concurrent clients.
package struct AgentWorkload: Sendable {
    /// Bytes of the whole-file transfers.
    package var size: Int
    /// Alternating rounds of the transfers (medians are reported).
    package var rounds: Int
    /// Operations per figure (split among the clients).
    package var operations = 4000

    package init(size: Int, rounds: Int) {
        self.size = size
        self.rounds = rounds
    }

    /// One latency figure: total operations per second, median and 99th percentile per operation.
    package struct Rate: Sendable {
        package var perSecond: Double
        package var p50: Duration
        package var p99: Duration
    }

    /// Runs the figures on `scratch`'s store, served by an agent on a thread of this process.
    package func run(_ scratch: BenchScratch, progress: (String) -> Void) throws -> [BenchRow] {
        let server = try AgentServer(store: scratch.store, socketPath: scratch.directory.appendingPathComponent("run/agent.sock").path,
                                     configuration: AgentServer.Configuration(autoLock: nil))
        let finished = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            server.run()
            finished.signal()
        }
        defer {
            server.stop()
            finished.wait()
        }
        let client = try AgentStore(socketPath: server.socketPath)
        let source = scratch.rawPath("agent-source"), output = scratch.rawPath("agent-output")
        try Self.makeSource(at: source, size: size)

        var times: [String: [Duration]] = [:]
        for round in 0..<rounds {
            progress("through the agent, \(size >> 20) MiB, round \(round + 1) of \(rounds)")
            for agentSide in round % 2 == 0 ? [true, false] : [false, true] {
                let suffix = agentSide ? "agent" : "in-process"
                times["put " + suffix, default: []].append(try measure {
                    let input = try FileDescriptor.open(FilePath(source.path), .readOnly)
                    defer { try? input.close() }
                    if agentSide {
                        try client.write(contentsOf: input, to: "agent/put")
                    } else {
                        var buffer = [UInt8](repeating: 0, count: 1 << 20)
                        try scratch.store.write(to: "agent/local", protection: nil, exclusive: false) { () throws(DataProtectionError) -> Data? in
                            do {
                                let count = try buffer.withUnsafeMutableBytes { try input.read(into: $0) }
                                return count == 0 ? nil : Data(buffer[0..<count])
                            } catch {
                                throw DataProtectionError(.ioFailure, "Reading \(source.path) failed: \(error).")
                            }
                        }
                    }
                })
                times["get " + suffix, default: []].append(try measure {
                    let out = try FileDescriptor.open(FilePath(output.path), .writeOnly, options: [.create, .truncate],
                                                      permissions: [.ownerReadWrite])
                    defer { try? out.close() }
                    if agentSide {
                        try client.copyContents(atPath: "agent/put", to: out)
                    } else {
                        let handle = try scratch.store.fileHandle(forReadingAtPath: "agent/local")
                        defer { try? handle.close() }
                        while case let piece = try handle.read(upToCount: 1 << 20), !piece.isEmpty {
                            _ = try piece.withUnsafeBytes { try out.writeAll($0) }
                        }
                    }
                })
            }
        }
        func rate(_ name: String) -> Double { Double(size) / median(times[name] ?? []).seconds }
        var rows: [BenchRow] = []
        for what in ["put", "get"] {
            let agent = rate(what + " agent"), local = rate(what + " in-process")
            rows.append(BenchRow(what: "\(what) \(size >> 20) MiB through the agent", store: StoreBench.rate(agent),
                                 baseline: "\(StoreBench.rate(local)) in process", ratio: agent / local, target: "≥ 0.80",
                                 met: agent / local >= 0.8, note: "the agent reads/writes the caller's descriptor"))
        }

        try scratch.store.write(Data(repeating: 0x42, count: 4096), to: "agent/small")
        for clients in [1, 16] {
            progress("4 KiB get and stat, \(clients) client\(clients == 1 ? "" : "s")")
            let agentClients = try (0..<clients).map { _ in try AgentStore(socketPath: server.socketPath) }
            let store = scratch.store
            for what in ["get", "stat"] {
                @Sendable func operation(_ target: some ProtectedFileSystem) throws {
                    if what == "get" { _ = try target.contents(atPath: "agent/small") } else { _ = try target.attributesOfItem(atPath: "agent/small") }
                }
                let agent = try Self.rate(clients: clients, operations: operations) { try operation(agentClients[$0]) }
                let local = try Self.rate(clients: clients, operations: operations) { _ in try operation(store) }
                rows.append(BenchRow(
                    what: "4 KiB \(what), \(clients) client\(clients == 1 ? "" : "s"), agent", store: Self.describe(agent),
                    baseline: "\(Self.describe(local)) in process", ratio: agent.perSecond / local.perSecond, target: "-", met: nil,
                    note: "operations per second; p50/p99 per operation"))
            }
        }
        return rows
    }

    /// `operations` calls of `body` spread over `clients` threads (each its own index).
    static func rate(clients: Int, operations: Int, _ body: @escaping @Sendable (Int) throws -> Void) throws -> Rate {
        let perClient = max(1, operations / clients)
        let latencies = LatencyLog()
        let failure = LatencyLog.Failure()
        let elapsed = measure {
            DispatchQueue.concurrentPerform(iterations: clients) { index in
                var mine: [Duration] = []
                mine.reserveCapacity(perClient)
                let clock = ContinuousClock()
                for _ in 0..<perClient {
                    let start = clock.now
                    do { try body(index) } catch { failure.record(error) }
                    mine.append(clock.now - start)
                }
                latencies.append(mine)
            }
        }
        if let error = failure.error { throw error }
        let sorted = latencies.all.sorted()
        return Rate(perSecond: Double(sorted.count) / elapsed.seconds, p50: sorted[sorted.count / 2],
                    p99: sorted[min(sorted.count - 1, sorted.count * 99 / 100)])
    }

    static func describe(_ rate: Rate) -> String {
        let perSecond = rate.perSecond >= 10_000 ? String(format: "%.0fk/s", rate.perSecond / 1000) : String(format: "%.0f/s", rate.perSecond)
        return "\(perSecond) (p50 \(StoreBench.micro(rate.p50)), p99 \(StoreBench.micro(rate.p99)))"
    }

    /// A local file of `size` pseudo-random bytes.
    static func makeSource(at url: URL, size: Int) throws {
        let file = try FileDescriptor.open(FilePath(url.path), .writeOnly, options: [.create, .truncate], permissions: [.ownerReadWrite])
        defer { try? file.close() }
        var generator = SystemRandomNumberGenerator()
        let piece = Data((0..<(1 << 20)).map { _ in UInt8.random(in: 0...255, using: &generator) })
        var left = size
        while left > 0 {
            let count = min(left, piece.count)
            _ = try piece.prefix(count).withUnsafeBytes { try file.writeAll($0) }
            left -= count
        }
    }
}

/// Latencies gathered from many threads.
final class LatencyLog: @unchecked Sendable {
    private let lock = NSLock()
    private var values: [Duration] = []

    func append(_ more: [Duration]) {
        lock.lock()
        values += more
        lock.unlock()
    }

    var all: [Duration] {
        lock.lock()
        defer { lock.unlock() }
        return values
    }

    /// The first error of many threads.
    final class Failure: @unchecked Sendable {
        private let lock = NSLock()
        private(set) var error: (any Error)?

        func record(_ error: any Error) {
            lock.lock()
            if self.error == nil { self.error = error }
            lock.unlock()
        }
    }
}
