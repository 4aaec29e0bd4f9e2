import DataProtection
import Dispatch
import Foundation

/// Reads a local file or standard input in pieces on a background queue, up to
/// `depth` pieces ahead, so that reading overlaps the encryption of the piece
/// before (constant memory). A read error is thrown by the ``next()`` that
/// would have returned the failed piece.
final class PrefetchingInput: @unchecked Sendable {
    private let handle: FileHandle
    private let pieceSize: Int
    private let queue = DispatchQueue(label: "dpctl.input", qos: .userInitiated)
    /// Pieces read, in order; `nil` marks the end, an error a failed read.
    private var ready: [Result<Data?, any Error>] = []
    private let condition = NSCondition()
    private let depth: Int
    private var stopped = false

    /// Starts reading `handle` in pieces of `pieceSize` bytes.
    init(_ handle: FileHandle, pieceSize: Int, depth: Int = 2) {
        self.handle = handle
        self.pieceSize = pieceSize
        self.depth = depth
        queue.async { [self] in readAll() }
    }

    /// The next piece; `nil` at the end of the input.
    func next() throws -> Data? {
        condition.lock()
        defer { condition.unlock() }
        while ready.isEmpty { condition.wait() }
        let first = ready.removeFirst()
        condition.signal()
        return try first.get()
    }

    /// Stops reading ahead (what was read is dropped).
    func cancel() {
        condition.lock()
        stopped = true
        ready.removeAll()
        condition.broadcast()
        condition.unlock()
    }

    /// Waits until the background read has returned (so that the handle can be closed).
    func waitUntilStopped() {
        queue.sync {}
    }

    /// Up to `pieceSize` bytes (fewer only at the end), with `read(2)` straight into
    /// the piece: `FileHandle.read(upToCount:)` reads in 4 KiB system calls.
    private func readPiece() throws -> Data {
        var piece = Data(count: pieceSize)
        var filled = 0
        while filled < pieceSize {
            let got = piece.withUnsafeMutableBytes { buffer in
                read(handle.fileDescriptor, buffer.baseAddress! + filled, pieceSize - filled)
            }
            if got < 0 {
                if errno == EINTR { continue }
                throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO)
            }
            if got == 0 { break }
            filled += got
        }
        if filled < pieceSize { piece.removeSubrange(filled...) }
        return piece
    }

    private func readAll() {
        while true {
            let result: Result<Data?, any Error>
            do {
                let piece = try readPiece()
                result = .success(piece.isEmpty ? nil : piece)
            } catch {
                result = .failure(error)
            }
            condition.lock()
            while ready.count >= depth && !stopped { condition.wait() }
            if stopped {
                condition.unlock()
                return
            }
            ready.append(result)
            condition.broadcast()
            condition.unlock()
            if case .success(let piece) = result, piece != nil { continue }
            return
        }
    }
}
