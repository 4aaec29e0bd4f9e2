import DataProtection
import Foundation
import SocketBridge
import SodiumBridge
import SystemPackage

/// A stream of pieces on a data channel (`Keys/agent-protocol.md` §4, `writeFile` source 2
/// and `sqlStream`): each a 4-byte big-endian length and that many bytes, up to a piece of
/// length 0, the end marker. A stream that ends without it was cut: its sender failed or went away.
struct AgentPieceReader {
    let descriptor: FileDescriptor
    /// The most bytes one piece may hold.
    let limit: Int
    /// What the channel carries, for errors ("the client's content").
    let describe: String
    private(set) var ended = false
    /// Called before each read (it throws to give up: a client's watch on a silent agent).
    var beforeRead: (() throws(DataProtectionError) -> Void)?
    /// Where pieces are read, reused (a put of a gigabyte in pieces allocates it once).
    private var buffer: [UInt8] = []
    /// Stops the reading at the discard of the key of the class the pieces are plaintext of.
    let watch: AgentDiscardWatch?

    init(_ descriptor: FileDescriptor, limit: Int, describe: String, watch: AgentDiscardWatch? = nil) {
        self.descriptor = descriptor
        self.limit = limit
        self.describe = describe
        self.watch = watch
    }

    /// Zeroes the buffer (the last piece): its bytes were taken, or are to be forgotten.
    mutating func wipe() {
        Sodium.wipe(&buffer)
    }

    /// The next piece's bytes (valid until the next call); `nil` after the end marker. `cut`
    /// describes a stream that ends without it.
    mutating func next(cut: @autoclosure () -> DataProtectionError) throws(DataProtectionError) -> ArraySlice<UInt8>? {
        guard !ended else { return nil }
        try read(4, cut: cut())
        let length = buffer[0..<4].reduce(0) { $0 << 8 | Int($1) }
        guard length <= limit else {
            throw DataProtectionError(.invalidArgument, "A piece of \(length) bytes in \(describe) (at most \(limit)).")
        }
        guard length > 0 else {
            ended = true
            return nil
        }
        try read(length, cut: cut())
        return buffer[0..<length]
    }

    /// Reads exactly `count` bytes into the start of ``buffer``, which grows with the bytes
    /// received (each step at most doubles them), not with the length a piece announces.
    private mutating func read(_ count: Int, cut: @autoclosure () -> DataProtectionError) throws(DataProtectionError) {
        var filled = 0
        while filled < count {
            if buffer.count <= filled {
                buffer.append(contentsOf: repeatElement(0, count: min(count, max(4096, filled * 2)) - buffer.count))
            }
            let end = min(count, buffer.count)
            try AgentDiscardWatch.waitUntilReadable(descriptor, watch: watch)
            try beforeRead?()
            let got: Int
            do {
                got = try buffer.withUnsafeMutableBytes { bytes in
                    try descriptor.read(into: UnsafeMutableRawBufferPointer(rebasing: bytes[filled..<end]), retryOnInterrupt: true)
                }
            } catch let error as Errno where error == .connectionReset || error == .brokenPipe {
                throw cut()
            } catch {
                throw DataProtectionError(.ioFailure, "Cannot read \(describe): \(error).")
            }
            guard got > 0 else { throw cut() }
            filled += got
        }
    }
}

/// Writes pieces (``AgentPieceReader``) on a data socket.
enum AgentPieceWriter {
    /// Sends `bytes` as one piece (an empty one is the end marker).
    static func send(_ bytes: some Collection<UInt8>, on socket: UnixSocket) throws(SocketError) {
        var piece = [UInt8]()
        piece.reserveCapacity(4 + bytes.count)
        withUnsafeBytes(of: UInt32(bytes.count).bigEndian) { piece.append(contentsOf: $0) }
        piece.append(contentsOf: bytes)
        try socket.send(piece)
    }

    /// Sends `bytes` as one piece, stopping at the discard `watch` looks for (a piece of
    /// plaintext for a client that may have paused reading); then wipes the copy it sent.
    static func send(_ bytes: some Collection<UInt8>, on socket: UnixSocket, watch: AgentDiscardWatch?) throws {
        guard let watch else { return try send(bytes, on: socket) }
        var piece = [UInt8]()
        piece.reserveCapacity(4 + bytes.count)
        withUnsafeBytes(of: UInt32(bytes.count).bigEndian) { piece.append(contentsOf: $0) }
        piece.append(contentsOf: bytes)
        defer { Sodium.wipe(&piece) }
        try piece.withUnsafeBytes { try AgentDiscardWatch.send($0, on: socket, watch: watch) }
    }

    /// Sends `data` as pieces of at most 1 MiB (none when it is empty); returns how many.
    @discardableResult
    static func send(splitting data: Data, on socket: UnixSocket) throws(SocketError) -> Int {
        var start = data.startIndex
        var count = 0
        while start < data.endIndex {
            let end = min(data.endIndex, start + AgentWireFormat.maximumInlineData)
            try send(data[start..<end], on: socket)
            start = end
            count += 1
        }
        return count
    }

    /// Sends the end marker.
    static func end(on socket: UnixSocket) throws(SocketError) {
        try send([UInt8](), on: socket)
    }
}
