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
            // Ciphertext, read straight into memory that is not zeroed first (the read fills what is used).
            let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: max(count, 1), alignment: 16)
            do {
                let read = try descriptor.read(into: UnsafeMutableRawBufferPointer(rebasing: buffer[0..<count]), retryOnInterrupt: true)
                return Data(bytesNoCopy: buffer.baseAddress!, count: read, deallocator: .custom { pointer, _ in pointer.deallocate() })
            } catch {
                buffer.deallocate()
                throw DataProtectionError(.ioFailure, "Cannot read the archive: \(error).")
            }
        }
    }
}

/// A buffered reader over a ``BackupInput``: lines for the age header, then exact counts.
///
/// The input is read in blocks of 1 MiB, kept as they came: a count that lies inside one
/// block is returned as a slice of it (no copy), and only a count that straddles two blocks
/// (one age chunk per MiB) is gathered into a buffer of its own.
final class ByteReader {
    private let input: BackupInput
    /// The bytes read and not yet taken, in order (slices of the blocks read).
    private var blocks: [Data] = []
    private var available = 0
    private var ended = false
    private(set) var consumed: UInt64 = 0
    private static let blockSize = 1 << 20

    init(_ input: BackupInput) { self.input = input }

    private func fill(atLeast count: Int) throws(DataProtectionError) {
        while available < count && !ended {
            let piece = try input.read(max(count - available, Self.blockSize))
            if piece.isEmpty {
                ended = true
            } else {
                blocks.append(piece)
                available += piece.count
            }
        }
    }

    /// The next `count` bytes (at most ``available``).
    private func take(_ count: Int) -> Data {
        defer {
            available -= count
            consumed += UInt64(count)
        }
        if let first = blocks.first, first.count >= count {
            blocks[0] = first.dropFirst(count)
            if blocks[0].isEmpty { blocks.removeFirst() }
            // Small reads (the header, the nonce) are rebased; a chunk stays a slice of its block.
            return count < 4096 ? Data(first.prefix(count)) : first.prefix(count)
        }
        var gathered = Data(capacity: count)
        while gathered.count < count {
            let first = blocks[0], need = count - gathered.count
            if first.count <= need {
                gathered.append(first)
                blocks.removeFirst()
            } else {
                gathered.append(first.prefix(need))
                blocks[0] = first.dropFirst(need)
            }
        }
        return gathered
    }

    /// The next line without its newline; `nil` if none ends within `limit` bytes or the
    /// input ends first.
    func readLine(limit: Int) throws(DataProtectionError) -> Data? {
        var searched = 0
        while true {
            // The header's lines: one block to search (a copy at most once per line).
            if blocks.count > 1 {
                let whole = available
                let merged = take(whole)
                (available, consumed) = (whole, consumed - UInt64(whole))
                blocks = [merged]
            }
            if let first = blocks.first, let newline = first[(first.startIndex + searched)...].firstIndex(of: UInt8(ascii: "\n")) {
                let line = take(newline - first.startIndex)
                _ = take(1)
                return Data(line)
            }
            searched = available
            guard searched < limit else { return nil }
            let before = available
            try fill(atLeast: before + 1)
            if available == before { return nil }
        }
    }

    /// Up to `count` bytes: fewer only at the end.
    func read(_ count: Int) throws(DataProtectionError) -> Data {
        try fill(atLeast: count)
        return take(min(count, available))
    }

    /// Whether the input has no byte left.
    func atEnd() throws(DataProtectionError) -> Bool {
        try fill(atLeast: 1)
        return available == 0
    }
}
