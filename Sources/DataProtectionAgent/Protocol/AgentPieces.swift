import DataProtection
import Foundation
import SocketBridge
import SystemPackage

/// A stream of pieces on a data socket (`Keys/agent-protocol.md` §4, `writeFile` source 2
/// and `sqlStream`): each a 4-byte big-endian length and that many bytes, up to a piece of
/// length 0, the end marker. A stream that ends without it was cut: its sender failed or went away.
struct AgentPieceReader {
    let socket: UnixSocket
    /// The most bytes one piece may hold.
    let limit: Int
    private(set) var ended = false

    init(_ socket: UnixSocket, limit: Int) {
        self.socket = socket
        self.limit = limit
    }

    /// The next piece's bytes; `nil` after the end marker. `cut` describes a stream that ends without it.
    mutating func next(cut: @autoclosure () -> DataProtectionError) throws(DataProtectionError) -> [UInt8]? {
        guard !ended else { return nil }
        let header = try read(4, cut: cut())
        let length = header.reduce(0) { $0 << 8 | Int($1) }
        guard length <= limit else {
            throw DataProtectionError(.ioFailure, "A piece of \(length) bytes on the data channel (at most \(limit)).")
        }
        guard length > 0 else {
            ended = true
            return nil
        }
        return try read(length, cut: cut())
    }

    private func read(_ count: Int, cut: @autoclosure () -> DataProtectionError) throws(DataProtectionError) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: count)
        var filled = 0
        while filled < count {
            do {
                let (got, stray) = try bytes.withUnsafeMutableBytes { buffer throws(SocketError) in
                    try socket.receive(into: UnsafeMutableRawBufferPointer(rebasing: buffer[filled...]))
                }
                if let stray { try? FileDescriptor(rawValue: stray).close() }  // none belongs on a data channel
                guard got > 0 else { throw cut() }
                filled += got
            } catch let error as SocketError {
                if error.isDisconnection { throw cut() }
                throw DataProtectionError(.ioFailure, "Cannot read the data channel: \(error).")
            } catch let error as DataProtectionError {
                throw error
            } catch {
                throw DataProtectionError(.ioFailure, "Cannot read the data channel: \(error).")
            }
        }
        return bytes
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
}
