import Foundation
import SodiumBridge
import Testing
@testable import DataProtection
@testable import DataProtectionBackup

/// A large file through create and restore: 1 GiB, the issue's size (`DP_BACKUP_LARGE_MIB`
/// sets another, e.g. 256 on a slow disk). Memory is measured in a process of its own (`dpctl bench --backup-only`,
/// `BackupCommandTests.memory`): tests of this process run in parallel and share its peak.
@Suite("Backups: a large file")
struct BackupLargeFileTests {
    static let mebibytes = ProcessInfo.processInfo.environment["DP_BACKUP_LARGE_MIB"].flatMap(Int.init) ?? 1024

    @Test("a large file (1 GiB): restored identical on a second device; age -d | tar -x gives the same bytes")
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
            let created = try backUp(source, to: archive, recipients: [identity.recipient!])
            #expect(created.contentBytes == UInt64(Self.mebibytes) << 20)
            let target = try makeStore(in: root, name: "target", passcode: "other")
            try restore(archive, into: target, identities: [identity])
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

            // Without dpctl: the real age and tar give the same bytes (streamed, compared MiB by MiB).
            let keyFile = root.appendingPathComponent("large-key.txt")
            try identity.identityFileLine!.bytes.withUnsafeBytes { try Data($0).write(to: keyFile) }
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/bin/sh")
            process.arguments = ["-c", "/usr/bin/age -d -i '\(keyFile.path)' '\(archive.path)' | /usr/bin/tar -x -O -f - large"]
            let output = Pipe()
            process.standardOutput = output
            process.standardInput = FileHandle.nullDevice
            try process.run()
            var extracted = 0
            while true {
                var mebibyte = Data()
                while mebibyte.count < 1 << 20, let more = try output.fileHandleForReading.read(upToCount: (1 << 20) - mebibyte.count), !more.isEmpty {
                    mebibyte += more
                }
                if mebibyte.isEmpty { break }
                extracted += 1
                var expected = piece
                expected[0] = UInt8(truncatingIfNeeded: extracted)
                if mebibyte != expected {
                    Issue.record("age -d | tar -x: MiB \(extracted) differs")
                    process.terminate()
                    break
                }
            }
            process.waitUntilExit()
            #expect(process.terminationStatus == 0)
            #expect(extracted == Self.mebibytes)
        }
    }
}
