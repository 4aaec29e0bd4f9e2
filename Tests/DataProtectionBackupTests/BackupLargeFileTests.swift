import Foundation
import SodiumBridge
import Testing
@testable import DataProtection
@testable import DataProtectionBackup

/// A large file through create and restore, with constant memory (issue 37 asks 1 GiB; the
/// default here is 256 MiB to keep a debug build's test time to seconds: set
/// `DP_BACKUP_LARGE_MIB=1024` for the issue's size).
@Suite("Backups: a large file")
struct BackupLargeFileTests {
    static let mebibytes = ProcessInfo.processInfo.environment["DP_BACKUP_LARGE_MIB"].flatMap(Int.init) ?? 256

    /// Resets the peak resident set to the current one (`/proc/self/clear_refs`, value 5).
    static func resetPeakResident() {
        try? Data("5".utf8).write(to: URL(fileURLWithPath: "/proc/self/clear_refs"))
    }

    /// The process's peak resident set (VmHWM), in bytes.
    static func peakResident() -> Int {
        let status = (try? String(contentsOfFile: "/proc/self/status", encoding: .utf8)) ?? ""
        let line = status.split(separator: "\n").first { $0.hasPrefix("VmHWM:") } ?? ""
        return (Int(line.split(separator: " ").dropFirst().first ?? "") ?? 0) * 1024
    }

    @Test("a large file: restored identical on a second device; create and restore add at most 64 MiB to the peak resident set")
    func largeFile() throws {
        try withScratch { root in
            let source = try makeStore(in: root, name: "source")
            let piece = Random.bytes(count: 1 << 20)
            var written = 0
            try source.write(to: "large", protection: .complete) { () -> Data? in
                guard written < Self.mebibytes else { return nil }
                written += 1
                var copy = piece
                copy[0] = UInt8(truncatingIfNeeded: written)
                return copy
            }
            let identity = AgeIdentity.generate()
            let archive = root.appendingPathComponent("large.age")
            let current = (try? String(contentsOfFile: "/proc/self/status", encoding: .utf8))?.split(separator: "\n")
                .first { $0.hasPrefix("VmRSS:") }.flatMap { Int($0.split(separator: " ").dropFirst().first ?? "") }.map { $0 * 1024 } ?? 0
            Self.resetPeakResident()
            let before = max(current, 0)
            let created = try backUp(source, to: archive, recipients: [identity.recipient!])
            #expect(created.contentBytes == UInt64(Self.mebibytes) << 20)
            let target = try makeStore(in: root, name: "target", passcode: "other")
            try restore(archive, into: target, identities: [identity])
            let growth = Self.peakResident() - before
            #expect(growth < 64 << 20, "peak resident set grew by \(growth >> 20) MiB")
            print("large file \(Self.mebibytes) MiB: peak resident set grew by \(growth >> 20) MiB over create and restore")
            let handle = try target.fileHandle(forReadingAtPath: "large")
            defer { try? handle.close() }
            for index in 1...Self.mebibytes {
                let read = try handle.read(upToCount: 1 << 20)
                var expected = piece
                expected[0] = UInt8(truncatingIfNeeded: index)
                guard read == expected else {
                    Issue.record("MiB \(index) differs")
                    return
                }
            }
            #expect(try handle.read(upToCount: 1).isEmpty)
        }
    }
}
