import DataProtection
import Foundation
import SystemPackage

/// Where an archive's bytes go: a file, a pipe, a socket (``BackupOutput/fileDescriptor(_:)``)
/// or any closure.
public struct BackupOutput: Sendable {
    let write: @Sendable (Data) throws(DataProtectionError) -> Void

    /// Bytes go to `write`, in order, in pieces of at most 64 KiB and a few bytes.
    public init(_ write: @escaping @Sendable (Data) throws(DataProtectionError) -> Void) {
        self.write = write
    }

    /// Bytes go to `descriptor` (written whole, retrying short writes). The descriptor stays open.
    public static func fileDescriptor(_ descriptor: FileDescriptor) -> BackupOutput {
        BackupOutput { (data: Data) throws(DataProtectionError) in
            do {
                _ = try data.withUnsafeBytes { try descriptor.writeAll($0) }
            } catch let error as Errno where error == .brokenPipe {
                throw DataProtectionError(.ioFailure, "The archive's reader went away (broken pipe).")
            } catch {
                throw DataProtectionError(.ioFailure, "Cannot write the archive: \(error).")
            }
        }
    }
}

/// Where an archive's bytes come from: a file, a pipe, a socket or any closure.
public struct BackupInput: Sendable {
    let read: @Sendable (Int) throws(DataProtectionError) -> Data

    /// `read(n)` returns up to `n` bytes, and empty data only at the end.
    public init(_ read: @escaping @Sendable (Int) throws(DataProtectionError) -> Data) {
        self.read = read
    }

    /// Bytes come from `descriptor` until its end. The descriptor stays open.
    public static func fileDescriptor(_ descriptor: FileDescriptor) -> BackupInput {
        BackupInput { (count: Int) throws(DataProtectionError) -> Data in
            var data = Data(count: count)
            do {
                let read = try data.withUnsafeMutableBytes { try descriptor.read(into: $0, retryOnInterrupt: true) }
                data.count = read
                return data
            } catch {
                throw DataProtectionError(.ioFailure, "Cannot read the archive: \(error).")
            }
        }
    }
}

/// A buffered reader over a ``BackupInput``: lines for the age header, then exact counts.
final class ByteReader {
    private let input: BackupInput
    private var buffer = Data()
    private var ended = false
    /// Bytes handed out so far.
    private(set) var consumed: UInt64 = 0

    init(_ input: BackupInput) { self.input = input }

    private func fill(atLeast count: Int) throws(DataProtectionError) {
        while buffer.count < count && !ended {
            let piece = try input.read(max(count - buffer.count, AgeFormat.sealedChunkByteCount + 1))
            if piece.isEmpty { ended = true } else { buffer.append(piece) }
        }
    }

    /// The next line without its `\n`; `nil` at the end or past `limit` bytes without a newline.
    func readLine(limit: Int) throws(DataProtectionError) -> Data? {
        var searched = 0
        while true {
            if let newline = buffer[(buffer.startIndex + searched)...].firstIndex(of: UInt8(ascii: "\n")) {
                let line = Data(buffer[buffer.startIndex..<newline])
                buffer = Data(buffer[(newline + 1)...])
                consumed += UInt64(line.count + 1)
                return line
            }
            searched = buffer.count
            guard searched < limit else { return nil }
            let before = buffer.count
            try fill(atLeast: before + 1)
            if buffer.count == before { return nil }
        }
    }

    /// Up to `count` bytes: fewer only at the end.
    func read(_ count: Int) throws(DataProtectionError) -> Data {
        try fill(atLeast: count)
        let take = min(count, buffer.count)
        let piece = Data(buffer.prefix(take))
        buffer = Data(buffer.dropFirst(take))
        consumed += UInt64(take)
        return piece
    }

    /// Whether the input has no byte left.
    func atEnd() throws(DataProtectionError) -> Bool {
        try fill(atLeast: 1)
        return buffer.isEmpty
    }
}
