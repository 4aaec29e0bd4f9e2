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
            while case let piece = try handle.read(upToCount: transferPieceSize), !piece.isEmpty {
                do { try FileHandle.standardOutput.write(contentsOf: piece) } catch {
                    throw DataProtectionError(.ioFailure, "Cannot write to standard output: \(error.localizedDescription)")
                }
                bar.advance(by: piece.count)
            }
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
            while case let piece = try handle.read(upToCount: transferPieceSize), !piece.isEmpty {
                try file.write(contentsOf: piece)
                bar.advance(by: piece.count)
            }
            try file.synchronize()
            if FileManager.default.fileExists(atPath: destination.path) {
                _ = try FileManager.default.replaceItemAt(destination, withItemAt: partial)
            } else {
                try FileManager.default.moveItem(at: partial, to: destination)
            }
            finished = true
        } catch let error as DataProtectionError {
            throw error
        } catch {
            throw DataProtectionError(.ioFailure, "Cannot write \(output): \(error.localizedDescription)")
        }
    }
}
