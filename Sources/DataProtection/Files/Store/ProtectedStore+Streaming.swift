import Dispatch
import Foundation
import SodiumBridge

extension ProtectedFileSystem {
    /// The contents of the file at `path` as an asynchronous sequence of pieces of
    /// up to `chunkSize` bytes, read with constant memory whatever the file's size.
    ///
    /// The file is opened at the first `next()`; every piece is read (and its class
    /// key checked) when it is asked for, so a `complete` file stops yielding once
    /// the device locks (in this process, or in the agent).
    public func chunks(atPath path: String, chunkSize: Int = 1 << 20) -> ProtectedChunks {
        ProtectedChunks(store: self, path: path, chunkSize: max(1, chunkSize))
    }

    /// The lines of the file at `path` (UTF-8, split at `\n`, a trailing `\r`
    /// removed), read with constant memory whatever the file's size: the
    /// protected counterpart of the line-by-line background reader.
    public func lines(atPath path: String) -> ProtectedLines {
        ProtectedLines(chunks: chunks(atPath: path, chunkSize: 64 * 1024))
    }
}

extension ProtectedStore {
    /// Writes the file at `path` from an asynchronous sequence of pieces, with
    /// constant memory; atomic, with the rules of ``write(_:to:protection:options:)-9mrrg``.
    ///
    /// A sequence that fails stores nothing. Its error is thrown as it is when it is a
    /// ``DataProtectionError``; any other error becomes `ioFailure`, naming it.
    public func write<S: AsyncSequence>(
        contentsOf sequence: S, to path: String, protection protectionChoice: ProtectionChoice = .inherited, exclusive: Bool = false
    ) async throws(DataProtectionError) where S.Element == Data {
        let protection = protectionChoice.protectionClass
        let writer = try prepareWriter(at: path, protection: protection, exclusive: exclusive)
        var pieces = sequence.makeAsyncIterator()
        while true {
            let piece: Data?
            do {
                piece = try await pieces.next()
            } catch {
                if let error = error as? DataProtectionError { throw error }
                throw DataProtectionError(.ioFailure, "The sequence of pieces for \(path) failed: \(error).")
            }
            guard let piece else { break }
            try writer.append(piece)
        }
        try commit(writer, exclusive: exclusive)
    }
}

/// The pieces of a protected file, as an `AsyncSequence` (see ``ProtectedFileSystem/chunks(atPath:chunkSize:)``).
public struct ProtectedChunks: AsyncSequence, Sendable {
    public typealias Element = Data
    /// Reading fails with the store's typed error.
    public typealias Failure = DataProtectionError
    let store: any ProtectedFileSystem
    let path: String
    let chunkSize: Int

    public func makeAsyncIterator() -> Iterator {
        Iterator(store: store, path: path, chunkSize: chunkSize)
    }

    /// Reads the next piece on demand.
    public struct Iterator: AsyncIteratorProtocol {
        let store: any ProtectedFileSystem
        let path: String
        let chunkSize: Int
        var handle: (any ProtectedFileHandling)?
        var finished = false

        public mutating func next() async throws(DataProtectionError) -> Data? {
            guard !finished else { return nil }
            do {
                if handle == nil { handle = try store.fileHandle(forReadingAtPath: path) }
                let piece = try handle!.read(upToCount: chunkSize)
                if piece.isEmpty {
                    finished = true
                    try handle?.close()
                    handle = nil
                    return nil
                }
                return piece
            } catch {
                finished = true
                try? handle?.close()
                handle = nil
                throw error
            }
        }
    }
}

/// The lines of a protected file, as an `AsyncSequence` (see ``ProtectedFileSystem/lines(atPath:)``).
public struct ProtectedLines: AsyncSequence, Sendable {
    public typealias Element = String
    /// Reading fails with the store's typed error.
    public typealias Failure = DataProtectionError
    let chunks: ProtectedChunks

    public func makeAsyncIterator() -> Iterator {
        Iterator(chunks: chunks.makeAsyncIterator())
    }

    /// Splits pieces into lines, keeping only the unfinished line between pieces.
    ///
    /// The plaintext it holds is wiped as it goes: each piece once copied, the buffer when a
    /// new piece replaces it and when the iterator is released (the lines themselves are the
    /// caller's).
    public struct Iterator: AsyncIteratorProtocol {
        var chunks: ProtectedChunks.Iterator
        let buffer = LineBuffer()
        var ended = false

        public mutating func next() async throws(DataProtectionError) -> String? {
            while true {
                let pending = buffer.bytes[buffer.start...]
                if let newline = pending.firstIndex(of: UInt8(ascii: "\n")) {
                    var line = pending[pending.startIndex..<newline]
                    if line.last == UInt8(ascii: "\r") { line = line.dropLast() }
                    buffer.start = newline + 1
                    return String(decoding: line, as: UTF8.self)
                }
                if ended {
                    defer { buffer.clear() }
                    return pending.isEmpty ? nil : String(decoding: pending, as: UTF8.self)
                }
                if var piece = try await chunks.next() {
                    buffer.append(piece)
                    Memory.wipe(&piece)
                } else {
                    ended = true
                }
            }
        }
    }
}

/// The unfinished line of a ``ProtectedLines`` iterator: bytes from `start` on are pending.
/// Every buffer it lets go of is wiped first, itself included when it is released.
final class LineBuffer {
    var bytes = Data()
    var start = 0

    deinit { Memory.wipe(&bytes) }

    /// Appends `piece` after the pending bytes, in a new buffer (the old one is wiped).
    func append(_ piece: Data) {
        var grown = Data(capacity: bytes.count - start + piece.count)
        grown.append(bytes[start...])
        grown.append(piece)
        Memory.wipe(&bytes)
        bytes = grown
        start = 0
    }

    func clear() {
        Memory.wipe(&bytes)
        bytes = Data()
        start = 0
    }
}

extension ProtectedFileHandle {
    private static let ioQueue = DispatchQueue(label: "DataProtection.io", qos: .userInitiated, attributes: .concurrent)

    /// Reads up to `count` bytes at `offset` off the caller's thread, leaving the
    /// handle's offset alone: the protected counterpart of a random-access
    /// dispatch I/O channel read.
    public func readData(atOffset offset: UInt64, upToCount count: Int) async throws(DataProtectionError) -> Data {
        try await Self.perform { () throws(DataProtectionError) -> Data in try self.read(atOffset: offset, upToCount: count) }
    }

    /// Writes `data` at `offset` off the caller's thread (in append mode: at the end).
    public func writeData(_ data: Data, atOffset offset: UInt64) async throws(DataProtectionError) {
        try await Self.perform { () throws(DataProtectionError) in try self.write(contentsOf: data, atOffset: offset) }
    }

    private static func perform<R: Sendable>(_ body: @escaping @Sendable () throws(DataProtectionError) -> R) async throws(DataProtectionError) -> R {
        let result: Result<R, DataProtectionError> = await withCheckedContinuation { continuation in
            ioQueue.async {
                do throws(DataProtectionError) {
                    continuation.resume(returning: .success(try body()))
                } catch {
                    continuation.resume(returning: .failure(error))
                }
            }
        }
        return try result.get()
    }
}
