import ArgumentParser
import DataProtection
import Foundation

/// Streams a protected file to a local file or standard output, in 1 MiB pieces.
struct Transfer {
    let session: Session
    let path: String
    let quiet: Bool

    func run(to output: String?) throws {
        let attributes = try session.store.attributesOfItem(atPath: path)
        guard attributes.type == .file else { throw DataProtectionError(.isADirectory, "\(path) is a directory.") }
        try session.unlock(for: attributes.protectionClass ?? .default)
        let handle = try session.store.fileHandle(forReadingAtPath: path)
        defer { try? handle.close() }
        let bar = ProgressBar(total: attributes.size, quiet: quiet)
        defer { bar.finish() }
        guard let output, output != "-" else {
            let stdout = PipelinedOutput(FileHandle.standardOutput, describe: "standard output")
            while case let piece = try handle.read(upToCount: transferPieceSize), !piece.isEmpty {
                try stdout.write(piece)
                bar.advance(by: piece.count)
            }
            try stdout.finish()
            return
        }
        // Into a temporary file beside the output, renamed into place at the end.
        let destination = URL(fileURLWithPath: output)
        let partial = destination.deletingLastPathComponent().appendingPathComponent(".\(destination.lastPathComponent).dpctl-\(UUID().uuidString)")
        guard FileManager.default.createFile(atPath: partial.path, contents: nil),
              let file = FileHandle(forWritingAtPath: partial.path) else {
            throw DataProtectionError(.ioFailure, "Cannot create \(output).")
        }
        var finished = false
        defer {
            try? file.close()
            if !finished { try? FileManager.default.removeItem(at: partial) }
        }
        do {
            let pipeline = PipelinedOutput(file, describe: output)
            while case let piece = try handle.read(upToCount: transferPieceSize), !piece.isEmpty {
                try pipeline.write(piece)
                bar.advance(by: piece.count)
            }
            try pipeline.finish()
            try file.synchronize()
            // rename(2) replaces an existing output atomically.
            guard rename(partial.path, destination.path) == 0 else {
                throw DataProtectionError(.ioFailure, "Cannot write \(output): \(String(cString: strerror(errno))).")
            }
            finished = true
        } catch let error as DataProtectionError {
            throw error
        } catch {
            throw DataProtectionError(.ioFailure, "Cannot write \(output): \(error.localizedDescription)")
        }
    }
}
