import ArgumentParser
import DataProtection
import DataProtectionAgent
import Foundation
import SystemPackage

/// Streams a protected file to a local file or standard output, in 1 MiB pieces.
struct Transfer {
    let session: Session
    let path: String
    let quiet: Bool

    func run(to output: String?) throws {
        let attributes = try session.store.attributesOfItem(atPath: path)
        guard attributes.type == .file else { throw DataProtectionError(.isADirectory, "\(path) is a directory.") }
        if let agent = session.agent { return try run(through: agent, to: output, size: attributes.size) }
        try session.unlock(for: attributes.protectionClass ?? .default)
        let handle = try session.store.fileHandle(forReadingAtPath: path)
        defer { try? handle.close() }
        let bar = ProgressBar(total: attributes.size, quiet: quiet)
        defer { bar.finish() }
        guard let output, output != "-" else {
            let stdout = PipelinedOutput(FileDescriptor.standardOutput, describe: "standard output")
            while case let piece = try handle.read(upToCount: transferPieceSize), !piece.isEmpty {
                try stdout.write(piece)
                bar.advance(by: piece.count)
            }
            try stdout.finish()
            return
        }
        let file = try OutputFile.open(output)
        do {
            let pipeline = PipelinedOutput(file.descriptor, describe: output)
            while case let piece = try handle.read(upToCount: transferPieceSize), !piece.isEmpty {
                try pipeline.write(piece)
                bar.advance(by: piece.count)
            }
            try pipeline.finish()
            try file.commit()
        } catch {
            file.abandon()
            throw error
        }
    }

    /// Through the agent: it writes the file straight into standard output or the output
    /// file's descriptor (passed over its socket), with no copy through this process.
    /// The progress bar follows the output's offset, which the agent's writes move.
    private func run(through agent: AgentStore, to output: String?, size: UInt64) throws {
        guard let output, output != "-" else {
            let bar = SharedOffsetProgress(descriptor: STDOUT_FILENO, total: size, quiet: quiet)
            defer { bar.stop() }
            do {
                try agent.copyContents(atPath: path, to: .standardOutput)
            } catch where AgentStore.isOutputClosed(error) {
                throw OutputClosed()  // `dpctl cat big | head`: the reader had enough
            }
            return
        }
        let file = try OutputFile.open(output)
        do {
            do {
                // Stopped before the commit, which closes the descriptor the bar reads.
                let bar = SharedOffsetProgress(descriptor: file.descriptor.rawValue, total: size, quiet: quiet)
                defer { bar.stop() }
                try agent.copyContents(atPath: path, to: file.descriptor)
            }
            try file.commit()
        } catch {
            file.abandon()
            throw error
        }
    }
}
