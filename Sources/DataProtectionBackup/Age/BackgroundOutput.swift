import DataProtection
import Foundation

/// The archive's output on a thread of its own: what is written is gathered into pieces of
/// about 1 MiB, each handed to `output` by that thread, so that the write system calls (the
/// kernel's copy into the page cache) overlap age's encryption and the store's reads instead
/// of following them on the encrypting thread. Only ciphertext passes through it.
final class BackgroundOutput: @unchecked Sendable {
    private let pipe: BackgroundPipe
    /// Touched only by the one thread that writes (the encrypting thread), then by ``finish()``
    /// once that thread has been joined.
    private var batch = Data()

    init(_ output: BackupOutput) {
        pipe = BackgroundPipe.consuming(capacity: 4) { (data: Data) throws(DataProtectionError) in try output.write(data) }
        batch.reserveCapacity(Backup.pieceSize + (64 << 10))
    }

    /// The output to write into.
    var output: BackupOutput {
        BackupOutput { (data: Data) throws(DataProtectionError) in try self.append(data) }
    }

    private func append(_ data: Data) throws(DataProtectionError) {
        batch.append(data)
        guard batch.count >= Backup.pieceSize else { return }
        try pipe.send(batch)
        batch = Data()
        batch.reserveCapacity(Backup.pieceSize + (64 << 10))
    }

    /// Writes what is gathered and waits for every write; throws the first failure.
    func finish() throws(DataProtectionError) {
        if !batch.isEmpty { try pipe.send(batch) }
        batch = Data()
        try pipe.finish()
    }

    /// Stops the writing thread and waits for it.
    func cancel() { pipe.cancel() }
}
