import Foundation
import Testing
@testable import DataProtection

@Suite struct StoreSmokeTests {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("dp-store-smoke-\(UUID())")
    let clock = VirtualClock()

    func makeStore(grace: Duration = .zero) throws -> ProtectedStore {
        try ProtectedStore(directory: directory, clock: clock, configuration: DeviceConfiguration(gracePeriod: grace, passcodeCost: .minimal))
    }

    @Test func roundTripAndLock() throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let store = try makeStore()
        try store.device.unlock()
        try store.device.setPasscode("1234")
        let big = Data((0..<100_000).map { UInt8(truncatingIfNeeded: $0 &* 31) })
        try store.write(big, to: "Documents/big.bin", protection: .complete)
        #expect(try store.contents(atPath: "Documents/big.bin") == big)
        #expect(try store.contentsOfDirectory(atPath: "/") == ["Documents"])
        #expect(try store.contentsOfDirectory(atPath: "Documents") == ["big.bin"])
        let handle = try store.openFile(atPath: "Documents/log.txt", create: true, protection: .complete)
        try handle.write(contentsOf: Data("hello".utf8))
        try store.device.lock()
        #expect(throws: DataProtectionError.self) { try handle.write(contentsOf: Data("x".utf8)) }
        #expect(throws: DataProtectionError.self) { try store.contents(atPath: "Documents/big.bin") }
        #expect(try store.attributesOfItem(atPath: "Documents/big.bin").size == 100_000)
        try store.device.unlock(passcode: "1234")
        try handle.write(contentsOf: Data(" world".utf8))
        try handle.close()
        #expect(try store.contents(atPath: "Documents/log.txt") == Data("hello world".utf8))
        // Class B: created and written while locked.
        try store.device.lock()
        let b = try store.openFile(atPath: "Documents/b.txt", create: true, protection: .completeUnlessOpen)
        try b.write(contentsOf: Data("locked write".utf8))
        #expect(try store.contents(atPath: "Documents/b.txt") == Data("locked write".utf8))
        try b.close()
        #expect(throws: DataProtectionError.self) { try store.contents(atPath: "Documents/b.txt") }
        try store.device.unlock(passcode: "1234")
        #expect(try store.contents(atPath: "Documents/b.txt") == Data("locked write".utf8))
    }

    @Test func randomAccessAndTruncate() throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let store = try makeStore()
        try store.device.unlock()
        let handle = try store.openFile(atPath: "f", create: true)
        var model = Data()
        var generator = SystemRandomNumberGenerator()
        for step in 0..<300 {
            let offset = Int.random(in: 0...(model.count + 40_000), using: &generator)
            switch step % 5 {
            case 0, 1, 2:
                let data = Data((0..<Int.random(in: 1...50_000, using: &generator)).map { _ in UInt8.random(in: 0...255, using: &generator) })
                try handle.write(contentsOf: data, atOffset: UInt64(offset))
                if offset > model.count { model.append(Data(count: offset - model.count)) }
                let end = offset + data.count
                if end > model.count { model.append(Data(count: end - model.count)) }
                model.replaceSubrange(offset..<end, with: data)
            case 3:
                let size = Int.random(in: 0...(model.count + 20_000), using: &generator)
                try handle.truncate(atOffset: UInt64(size))
                if size < model.count { model.removeSubrange(size...) } else { model.append(Data(count: size - model.count)) }
            default:
                try handle.synchronize()
            }
            let start = Int.random(in: 0...model.count, using: &generator)
            let count = Int.random(in: 0...70_000, using: &generator)
            let got = try handle.read(atOffset: UInt64(start), upToCount: count)
            #expect(got == model.subdata(in: start..<min(model.count, start + count)), "step \(step)")
        }
        try handle.close()
        #expect(try store.contents(atPath: "f") == model)
    }
}
