import Foundation
import Testing

/// dpctl replaces free(3) and realloc(3) (to wipe what the agent releases): every block must
/// still go back to the allocator that made it, a preloaded one included.
@Suite("A preloaded allocator")
struct PreloadedAllocatorTests {
    static let jemalloc = ["/usr/lib/x86_64-linux-gnu/libjemalloc.so.2", "/usr/lib/aarch64-linux-gnu/libjemalloc.so.2",
                           "/usr/lib/libjemalloc.so.2"].first { FileManager.default.fileExists(atPath: $0) }

    @Test("with jemalloc preloaded, the agent (wiping freed memory) and its clients work",
          .enabled(if: jemalloc != nil, "libjemalloc2 is not installed"))
    func jemallocPreloaded() throws {
        let fixture = try StoreFixture()
        try fixture.initialize()
        let preload = ["LD_PRELOAD": Self.jemalloc!]
        // Before: "munmap_chunk(): invalid pointer", SIGABRT, for every command (jemalloc's blocks went to glibc's free).
        let version = try fixture.run(["--version"], passcode: nil, extra: preload)
        #expect(version.status == 0, "\(version.standardError)")
        let started = try fixture.run(["agent", "start", "--auto-lock", "never", "--grace", "0s"], passcode: nil, extra: preload)
        #expect(started.status == 0, "\(started.standardError)")
        defer { _ = try? fixture.run(["agent", "stop"], passcode: nil) }
        #expect(try fixture.run(["unlock"], passcode: "1234", extra: preload).status == 0)
        let source = try fixture.localFile("data", Data(repeating: 7, count: 3 << 20))
        #expect(try fixture.run(["put", source.path, "a", "--class", "complete"], passcode: nil, extra: preload).status == 0)
        let read = try fixture.run(["cat", "a"], passcode: nil, extra: preload)
        #expect(read.status == 0 && read.standardOutput.utf8.count == 3 << 20, "\(read.standardError)")
        let stopped = try fixture.run(["agent", "stop"], passcode: nil, extra: preload)
        #expect(stopped.status == 0, "\(stopped.standardError)")
    }
}
