import DataProtection
import DataProtectionBackup
import Foundation
import SystemPackage

/// Backups next to the tools users would otherwise reach for, on the same plaintext in the
/// same run (issue 37): `Backup.create` of a store holding one file of `size` bytes against
/// `tar c | age -r` of the same file, and `Backup.restore` into an empty store against
/// `age -d | tar x`; and the peak resident memory each adds (no KDF: X25519 recipients).
package struct BackupWorkload: Sendable {
    /// Bytes of the file backed up.
    package var size: Int
    /// Alternating rounds (medians are reported).
    package var rounds: Int

    package init(size: Int, rounds: Int) {
        self.size = size
        self.rounds = rounds
    }

    /// What one run measured.
    package struct Figures: Sendable {
        package var create: Duration
        package var tarAge: Duration
        package var restore: Duration
        package var ageTar: Duration
        /// Peak resident growth of create and of restore, in bytes (nil where /proc is missing).
        package var createPeak: Int?
        package var restorePeak: Int?
    }

    /// Whether `age` and `tar` are on this machine (else the rows say so).
    package static var baselineAvailable: Bool {
        FileManager.default.isExecutableFile(atPath: "/usr/bin/age") && FileManager.default.isExecutableFile(atPath: "/usr/bin/tar")
    }

    /// A source store holding the file, the same plaintext as a local tree, and a key pair:
    /// each step of the comparison, runnable alone (`Benchmarks/`) or in rounds (``measure(in:progress:)``).
    package final class Prepared: @unchecked Sendable {
        let parent: URL?
        let source: BenchScratch
        let plain: URL
        let identity: AgeIdentity
        let keyFile: URL
        let ours: URL
        let theirs: URL

        init(size: Int, in parent: URL?) throws {
            self.parent = parent
            source = try BenchScratch(in: parent)
            plain = source.directory.appendingPathComponent("raw/plain")
            try FileManager.default.createDirectory(at: plain.appendingPathComponent("backup"), withIntermediateDirectories: true)
            let plainFile = plain.appendingPathComponent("backup/data")
            try AgentWorkload.makeSource(at: plainFile, size: size)
            let input = try FileDescriptor.open(FilePath(plainFile.path), .readOnly)
            defer { try? input.close() }
            var buffer = [UInt8](repeating: 0, count: 1 << 20)
            try source.store.write(to: "backup/data", protection: .completeUntilFirstUserAuthentication, exclusive: false) { () throws(DataProtectionError) -> Data? in
                let count: Int
                do {
                    count = try buffer.withUnsafeMutableBytes { try input.read(into: $0) }
                } catch {
                    throw DataProtectionError(.ioFailure, "Cannot read \(plainFile.path): \(error).")
                }
                return count == 0 ? nil : Data(buffer[0..<count])
            }
            let identity = AgeIdentity.generate(), keyFile = source.rawPath("key.txt")
            if let line = identity.identityFileLine {
                try line.bytes.withUnsafeBytes { try Data($0).write(to: keyFile) }
                chmod(keyFile.path, 0o600)
            }
            self.identity = identity
            self.keyFile = keyFile
            ours = source.rawPath("ours.age")
            theirs = source.rawPath("theirs.age")
        }

        /// `Backup.create` of the source store into a local file.
        package func create() throws {
            let output = try FileDescriptor.open(FilePath(ours.path), .writeOnly, options: [.create, .truncate], permissions: [.ownerReadWrite])
            defer { try? output.close() }
            try Backup.create(of: source.store, device: source.store.device, to: .fileDescriptor(output), recipients: [identity.recipient!])
        }

        /// `Backup.restore` of the last ``create()``'s archive into a new empty store (made before
        /// `body`'s clock starts, removed after).
        package func restore(timing body: (() throws -> Void) throws -> Void) throws {
            let target = try BenchScratch(in: parent)
            defer { target.remove() }
            let archive = try FileDescriptor.open(FilePath(ours.path), .readOnly)
            defer { try? archive.close() }
            try body { try Backup.restore(from: .fileDescriptor(archive), identities: [self.identity], into: target.store) }
        }

        /// The baseline `tar c | age -r` of the same plaintext.
        package func tarAge() throws {
            try BackupWorkload.shell("tar -c -C '\(plain.path)' . | age -r \(identity.recipient!) > '\(theirs.path)'")
        }

        /// The baseline `age -d | tar x` of the last ``tarAge()``'s archive into a new directory.
        package func ageTar() throws {
            let out = source.directory.appendingPathComponent("raw/extracted-\(UUID().uuidString.prefix(8))")
            try FileManager.default.createDirectory(at: out, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(at: out) }
            try BackupWorkload.shell("age -d -i '\(keyFile.path)' '\(theirs.path)' | tar -x -C '\(out.path)'")
        }

        /// Deletes everything.
        package func remove() { source.remove() }
    }

    /// The source store and plaintext of the comparison, in a scratch directory under `parent`.
    package func prepare(in parent: URL?) throws -> Prepared {
        try Prepared(size: size, in: parent)
    }

    /// Runs the rounds in a scratch directory under `parent`.
    package func measure(in parent: URL?, progress: (String) -> Void) throws -> Figures {
        let prepared = try prepare(in: parent)
        defer { prepared.remove() }
        var create: [Duration] = [], tarAge: [Duration] = [], restore: [Duration] = [], ageTar: [Duration] = []
        var createPeak: Int?, restorePeak: Int?
        for round in 0..<rounds {
            progress("backup of \(size >> 20) MiB, round \(round + 1) of \(rounds)")
            for oursFirst in round % 2 == 0 ? [true, false] : [false, true] {
                if oursFirst {
                    let before = PeakMemory.resident
                    PeakMemory.resetPeak()
                    create.append(try StoreBenchmarking.measure { try prepared.create() })
                    if let before, let peak = PeakMemory.peak { createPeak = max(createPeak ?? 0, peak - before) }
                    try prepared.restore { restoring in
                        let beforeRestore = PeakMemory.resident
                        PeakMemory.resetPeak()
                        restore.append(try StoreBenchmarking.measure { try restoring() })
                        if let beforeRestore, let peak = PeakMemory.peak { restorePeak = max(restorePeak ?? 0, peak - beforeRestore) }
                    }
                } else {
                    tarAge.append(try StoreBenchmarking.measure { try prepared.tarAge() })
                    ageTar.append(try StoreBenchmarking.measure { try prepared.ageTar() })
                }
            }
        }
        return Figures(create: median(create), tarAge: median(tarAge), restore: median(restore), ageTar: median(ageTar),
                       createPeak: createPeak, restorePeak: restorePeak)
    }

    /// The table rows of `figures`.
    package func rows(_ figures: Figures) -> [BenchRow] {
        func rate(_ duration: Duration) -> Double { Double(size) / duration.seconds }
        let create = rate(figures.create), tarAge = rate(figures.tarAge), restore = rate(figures.restore), ageTar = rate(figures.ageTar)
        func mebibytes(_ bytes: Int?) -> String { bytes.map { String(format: "%.1f MiB", Double($0) / 1_048_576) } ?? "-" }
        return [
            BenchRow(what: "backup create \(size >> 20) MiB", store: StoreBench.rate(create), baseline: "\(StoreBench.rate(tarAge)) tar c | age -r",
                     ratio: create / tarAge, target: "≥ 1.00", met: create / tarAge >= 1.0, note: "age X25519, to a local file"),
            BenchRow(what: "backup restore \(size >> 20) MiB", store: StoreBench.rate(restore), baseline: "\(StoreBench.rate(ageTar)) age -d | tar x",
                     ratio: restore / ageTar, target: "≥ 1.00", met: restore / ageTar >= 1.0, note: "into an empty store, all or nothing"),
            BenchRow(what: "backup peak RSS (create / restore)", store: "\(mebibytes(figures.createPeak)) / \(mebibytes(figures.restorePeak))",
                     baseline: "-", ratio: nil, target: "≤ 64 MiB",
                     met: figures.createPeak.map { $0 <= 64 << 20 && (figures.restorePeak ?? 0) <= 64 << 20 },
                     note: "growth over the resident set before; no KDF"),
        ]
    }

    static func shell(_ command: String) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/sh")
        process.arguments = ["-c", "set -e; " + command]
        try process.run()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw DataProtectionError(.ioFailure, "The baseline `\(command)` failed (status \(process.terminationStatus)).")
        }
    }
}
