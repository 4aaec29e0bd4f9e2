import Foundation
import Testing

/// Secure memory past `RLIMIT_MEMLOCK` is left swappable by libsodium without a word: the
/// library says so, once, through swift-log (issue 15); `dpctl` prints it as a warning.
@Suite("RLIMIT_MEMLOCK")
struct MemoryLockTests {
    static let prlimit = "/usr/bin/prlimit"

    /// `prlimit` with the locked-memory limit at `bytes`; for root, also without capabilities
    /// (CAP_IPC_LOCK locks past any limit).
    static func limited(to bytes: Int) -> [String] {
        let limit = [prlimit, "--memlock=\(bytes):\(bytes)", "--"]
        return getuid() == 0 ? limit + [ProcessProtectionTests.setpriv] + ProcessProtectionTests.capless : limit
    }

    static func scenario() throws -> URL {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("memlock-\(UUID().uuidString).scenario")
        try """
        scenario "enough secure memory to pass a small limit"
        device passcode=1234
        unlock 1234
        open big as h create class=complete
        h.write random:400000:1
        h.sync
        h.close
        get big -> random:400000:1

        """.write(to: url, atomically: true, encoding: .utf8)
        return url
    }

    /// Needs prlimit (and setpriv for root), and no sanitizer: ThreadSanitizer's runtime turns
    /// `mlock` into a no-op that succeeds (shadow memory), so no limit is ever hit under
    /// `.ci/sanitizers` (which sets `DP_SANITIZER`).
    static let available = FileManager.default.isExecutableFile(atPath: prlimit)
        && (getuid() != 0 || FileManager.default.isExecutableFile(atPath: ProcessProtectionTests.setpriv))
        && ProcessInfo.processInfo.environment["DP_SANITIZER"] == nil

    @Test("under a 64 KiB limit: one warning naming RLIMIT_MEMLOCK and how to raise it; the work is done", .enabled(if: available))
    func warnsOnce() throws {
        let scenario = try Self.scenario()
        defer { try? FileManager.default.removeItem(at: scenario) }
        let result = try DPCtlRunner.run(["scenario", "run", scenario.path], wrapper: Self.limited(to: 65_536))
        #expect(result.status == 0, "\(result.standardError)")
        #expect(result.standardOutput.contains("1 passed, 0 failed"))
        let warnings = result.standardError.split(separator: "\n").filter { $0.contains("RLIMIT_MEMLOCK") }
        #expect(warnings.count == 1, "\(result.standardError)")
        #expect(warnings.first?.contains("warning") == true && warnings.first?.contains("65536 bytes") == true
                && warnings.first?.contains("ulimit -l") == true, "\(warnings)")
    }

    @Test("under a limit that holds the work: no warning", .enabled(if: available))
    func silentWhenLocked() throws {
        let scenario = try Self.scenario()
        defer { try? FileManager.default.removeItem(at: scenario) }
        let result = try DPCtlRunner.run(["scenario", "run", scenario.path], wrapper: Self.limited(to: 4 << 20))
        #expect(result.status == 0, "\(result.standardError)")
        #expect(!result.standardError.contains("RLIMIT_MEMLOCK"), "\(result.standardError)")
    }
}
