import Foundation
import Testing
@testable import DataProtection

@Suite("Store concurrency")
struct ConcurrencyTests {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("dp-concurrency-\(UUID())")

    @Test("many threads: whole-file writes and reads of their own files, and one shared handle written at disjoint offsets")
    func manyThreads() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let store = try ProtectedStore(directory: directory, clock: VirtualClock(),
                                       configuration: DeviceConfiguration(passcodeCost: .minimal))
        try await store.device.unlock()
        let shared = try store.openFile(atPath: "shared.bin", create: true, protection: .complete)
        let workers = 8, rounds = 20, slot = 20_000
        try await withThrowingTaskGroup(of: Void.self) { group in
            for worker in 0..<workers {
                group.addTask {
                    for round in 0..<rounds {
                        let path = "w\(worker)/file\(round % 3)"
                        let data = Data(repeating: UInt8(truncatingIfNeeded: worker * 31 + round), count: 1000 + round * 700)
                        try store.write(data, to: path, protection: round.isMultiple(of: 2) ? .complete : .completeUnlessOpen)
                        #expect(try store.contents(atPath: path) == data)
                        let piece = Data(repeating: UInt8(truncatingIfNeeded: worker + round), count: slot)
                        try shared.write(contentsOf: piece, atOffset: UInt64((worker * rounds + round) * slot))
                        _ = try store.contentsOfDirectory(atPath: "w\(worker)")
                    }
                }
            }
            try await group.waitForAll()
        }
        try shared.synchronize()
        let other = try store.fileHandle(forReadingAtPath: "shared.bin")
        for worker in 0..<workers {
            for round in 0..<rounds {
                let got = try other.read(atOffset: UInt64((worker * rounds + round) * slot), upToCount: slot)
                #expect(got == Data(repeating: UInt8(truncatingIfNeeded: worker + round), count: slot))
            }
        }
        try other.close()
        try shared.close()
        #expect(try store.contentsOfDirectory(atPath: "/").count == workers + 1)
    }

    @Test("lock and unlock racing complete-handle writes: no write reports success after the key is gone, none acknowledged is lost")
    func lockRacingWrites() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let store = try ProtectedStore(directory: directory, clock: VirtualClock(),
                                       configuration: DeviceConfiguration(passcodeCost: .minimal))
        try await store.device.unlock()
        let handle = try store.openFile(atPath: "log", mode: .update, create: true, protection: .complete)
        let acknowledged = Acknowledged()
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                // Each unlocked window lasts until some write lands in it (bounded), so
                // successes and refusals both happen whatever the scheduling.
                for _ in 0..<40 {
                    let before = acknowledged.count
                    for _ in 0..<10_000 where acknowledged.count == before && !acknowledged.writersDone {
                        await Task.yield()
                    }
                    try store.device.lock()
                    try await store.device.unlock()
                }
                acknowledged.togglerDone = true
            }
            for writer in 0..<3 {
                group.addTask {
                    defer { acknowledged.writerFinished() }
                    // Until the toggler is done; a slot is used up only by a write that succeeded.
                    var slot = 0
                    while !acknowledged.togglerDone {
                        let offset = UInt64((writer * 100_000 + slot) * 8)
                        do {
                            try handle.write(contentsOf: Data(repeating: UInt8(writer + 1), count: 8), atOffset: offset)
                            acknowledged.add(offset, UInt8(writer + 1))
                            slot += 1
                        } catch let error as DataProtectionError {
                            #expect(error.code == .protectedDataUnavailable)
                        }
                        await Task.yield()
                    }
                }
            }
            try await group.waitForAll()
        }
        try handle.close()
        let contents = try await store.contents(atPath: "log")
        for (offset, byte) in acknowledged.all {
            #expect(contents.subdata(in: Int(offset)..<Int(offset) + 8) == Data(repeating: byte, count: 8))
        }
        #expect(acknowledged.count > 0)
    }
}

private final class Acknowledged: @unchecked Sendable {
    private let lock = NSLock()
    private var entries: [(UInt64, UInt8)] = []
    private var toggler = false
    private var finishedWriters = 0
    func add(_ offset: UInt64, _ byte: UInt8) { lock.withLock { entries.append((offset, byte)) } }
    var all: [(UInt64, UInt8)] { lock.withLock { entries } }
    var count: Int { lock.withLock { entries.count } }
    var togglerDone: Bool {
        get { lock.withLock { toggler } }
        set { lock.withLock { toggler = newValue } }
    }
    func writerFinished() { lock.withLock { finishedWriters += 1 } }
    var writersDone: Bool { lock.withLock { finishedWriters == 3 } }
}
