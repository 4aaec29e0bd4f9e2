import Foundation
import SystemPackage
import Testing
@testable import DataProtection

/// A flush that fails in the middle leaves a handle that still reads what was written,
/// and a later flush that commits it. Found through SQLite: a rollback journal grown past
/// a partial chunk, synchronized while a `pwrite` came back short, then read back as
/// "Chunk 0 does not authenticate" (the torn overwrite was read from disk in this process).
@Suite("Flushes that fail half way")
struct FailedFlushTests {
    @Test("a fault at every call of a flush that regrows a partial chunk: reads stay right, the next sync commits")
    func faultDuringRegrowth() throws {
        let first = patternBytes(12_304, seed: 1)
        let second = patternBytes(4_096, seed: 2)
        var expected = first
        expected.append(Data(count: 16_384 - first.count))
        expected.append(second)

        func prepare(_ fileSystem: FaultInjectingFileSystem, _ root: URL) throws -> (ProtectedStore, ProtectedFileHandle) {
            let store = try ScratchStore.unlocked(at: root, on: fileSystem, passcode: IOFaultTests.passcode)
            let handle = try store.openFile(atPath: "/journal", create: true, protection: .complete)
            try handle.write(contentsOf: first, atOffset: 0)
            try handle.synchronize()
            try handle.write(contentsOf: second, atOffset: 16_384)
            return (store, handle)
        }
        let counter = FaultInjectingFileSystem()
        let root = IOFaultTests.scratch()
        defer { try? FileManager.default.removeItem(at: root) }
        let (_, handle) = try prepare(counter, root)
        counter.resetCounts()
        try handle.synchronize()
        let counts = counter.counts
        #expect(try handle.read(atOffset: 0, upToCount: 100_000) == expected)

        var faults = 0
        for call in FaultInjectingFileSystem.Call.allCases {
            for occurrence in stride(from: 1, through: counts[call] ?? 0, by: 1) {
                let fault = FaultInjectingFileSystem.Fault(call: call, occurrence: occurrence, errno: .ioError)
                let fileSystem = FaultInjectingFileSystem()
                let root = IOFaultTests.scratch()
                defer { try? FileManager.default.removeItem(at: root) }
                let (store, handle) = try prepare(fileSystem, root)
                fileSystem.arm(fault)
                let synced = (try? handle.synchronize()) != nil
                fileSystem.disarm()
                faults += 1
                let read = Result { () throws(DataProtectionError) -> Data in try handle.read(atOffset: 0, upToCount: 100_000) }
                #expect(read == .success(expected), "\(fault) (sync \(synced ? "succeeded" : "failed")): read back \(read)")
                do {
                    try handle.synchronize()
                    try handle.close()
                    #expect(try store.contents(atPath: "/journal") == expected, "\(fault): after the next sync")
                } catch {
                    Issue.record("\(fault) (sync \(synced ? "succeeded" : "failed")): the next sync and read: \(error)")
                }
                try store.device.crash()
                let restarted = try ScratchStore.restarted(at: root, replacing: store)
                try restarted.device.unlock(passcode: IOFaultTests.passcode)
                let after = Result { () throws(DataProtectionError) -> Data in try restarted.contents(atPath: "/journal") }
                #expect(after == .success(expected), "\(fault): after a restart: \(after)")
            }
        }
        #expect(faults == counts.values.reduce(0, +))
    }
}
