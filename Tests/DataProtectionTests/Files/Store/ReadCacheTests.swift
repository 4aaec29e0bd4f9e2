import Foundation
import Testing
@testable import DataProtection
import SodiumBridge

/// Chunks that partial reads decrypted are kept for the next reads (a database's random
/// 4 KiB pages): every write, truncation, large direct write and key discard must be seen
/// by the next read exactly as without the cache.
@Suite struct ReadCacheTests {
    @Test func partialReadsSeeEveryChange() throws {
        try withStore { fixture in
            let store = fixture.store
            var model = patternBytes(300_000, seed: 3)
            try store.write(model, to: "/f", protection: .complete)
            let handle = try store.openFile(atPath: "/f")
            let other = try store.openFile(atPath: "/f")
            func check(_ what: String) throws {
                for offset in stride(from: 0, to: model.count + 5000, by: 3_001) {
                    let expected = offset < model.count ? model[offset..<min(model.count, offset + 4096)] : Data()
                    #expect(try handle.read(atOffset: UInt64(offset), upToCount: 4096) == Data(expected), "\(what): at \(offset)")
                    // The same through the read into a caller's buffer (SQLite's page reads).
                    var page = Data(repeating: 0xEE, count: 4096)
                    let count = try page.withUnsafeMutableBytes { buffer throws(DataProtectionError) in
                        try handle.read(atOffset: UInt64(offset), into: buffer)
                    }
                    #expect(count == expected.count && page.prefix(count) == Data(expected), "\(what): read into a buffer at \(offset)")
                }
            }
            try check("fresh")
            // A small write through the other handle into chunks the first one has cached.
            let small = Data(repeating: 0xAB, count: 100)
            try other.write(contentsOf: small, atOffset: 20_000)
            model.replaceSubrange(20_000..<20_100, with: small)
            try check("after a small write")
            // A large write (sealed straight from the data) over cached chunks.
            let large = patternBytes(40 * 16_384 + 777, seed: 9)
            try other.write(contentsOf: large, atOffset: 5)
            model.replaceSubrange(5..<min(model.count, 5 + large.count), with: large)
            try check("after a large write")
            try other.synchronize()
            try check("after a sync")
            // A truncation into a cached chunk, then growth past it (zeros).
            try other.truncate(atOffset: 100_003)
            model.removeSubrange(100_003...)
            try check("after a truncation")
            try other.write(contentsOf: Data([1]), atOffset: 150_000)
            model.append(Data(count: 150_000 - model.count))
            model.append(1)
            try check("after growing past a gap")
            // The lock wipes the cache: reads fail, then see the same bytes after unlock.
            try fixture.lock()
            #expect(throws: DataProtectionError.self) { _ = try handle.read(atOffset: 0, upToCount: 10) }
            try fixture.unlock()
            try check("after lock and unlock")
            try handle.close()
            try other.close()
            #expect(try store.contents(atPath: "/f") == model)
        }
    }

    @Test("the read cache evicts the chunk used longest ago, whatever order chunks came in")
    func leastRecentlyUsedGoesFirst() {
        var cache = ChunkReadCache()
        let buffers = (0..<5).map { index in SecureBytes(count: 16) { $0[0] = UInt8(index) } }
        for index in [3, 1, 4, 0, 2] { cache.insert(UInt64(index), buffers[index]) }
        #expect(cache.count == 5)
        cache.touch(3)  // now: 1, 4, 0, 2, 3
        cache.touch(0)  // now: 1, 4, 2, 3, 0
        cache.touch(0)  // the newest already: unchanged
        #expect(cache.remove(4) === buffers[4])  // now: 1, 2, 3, 0
        #expect(cache.remove(4) == nil)
        var evicted: [UInt8] = []
        while let oldest = cache.removeOldest() { evicted.append(oldest.withUnsafeBytes { $0[0] }) }
        #expect(evicted == [1, 2, 3, 0])
        #expect(cache.count == 0 && cache.indices.isEmpty && cache[0] == nil)
        cache.insert(7, buffers[2])
        #expect(cache[7] === buffers[2] && cache.indices == [7])
    }
}
