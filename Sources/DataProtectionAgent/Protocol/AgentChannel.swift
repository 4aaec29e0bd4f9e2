import DataProtection
import Foundation
import SocketBridge
import SodiumBridge
import SystemPackage

/// Frames over a byte stream: a 4-byte big-endian length, then that many payload bytes
/// (1 to ``AgentWireFormat/maximumFrameLength``). At most one descriptor travels with a frame.
///
/// A frame's memory grows with the bytes that arrive, not with the length it announces: a
/// peer that announces a megabyte and sends ten bytes holds a few kilobytes of its reader.
package struct AgentFrameReader {
    /// Reads into the buffer (0: end of stream), with the descriptor that came along, if any.
    package typealias Receive = (UnsafeMutableRawBufferPointer) throws -> (count: Int, descriptor: Int32?)

    let receive: Receive

    package init(receive: @escaping Receive) {
        self.receive = receive
    }

    /// The next frame; `nil` at a clean end of stream (between frames). A descriptor that
    /// came with the frame is returned; on any violation it is closed first.
    package func next() throws -> (payload: [UInt8], descriptor: FileDescriptor?)? {
        var descriptor: Int32?
        do {
            var header = [UInt8](repeating: 0, count: 4)
            guard try fill(&header, descriptor: &descriptor, endAllowed: true) else { return nil }
            let length = header.reduce(0) { $0 << 8 | Int($1) }
            guard length >= 1, length <= AgentWireFormat.maximumFrameLength else {
                throw AgentProtocolViolation("a frame of \(length) bytes (1 to \(AgentWireFormat.maximumFrameLength) allowed)")
            }
            // Grown in steps as bytes arrive: each step at most doubles what was received.
            var payload = [UInt8](repeating: 0, count: min(length, Self.firstStep))
            var received = 0
            while true {
                _ = try fill(&payload, from: received, descriptor: &descriptor, endAllowed: false)
                received = payload.count
                guard received < length else { break }
                payload.append(contentsOf: repeatElement(0, count: min(received, length - received)))
            }
            return (payload, descriptor.map { FileDescriptor(rawValue: $0) })
        } catch {
            if let descriptor { try? FileDescriptor(rawValue: descriptor).close() }
            throw error
        }
    }

    /// The memory a frame's payload starts with (and all of a smaller frame's).
    static let firstStep = 1 << 14

    /// Fills `buffer` from `start` on; `false` if the stream ended before its first byte and `endAllowed`.
    private func fill(_ buffer: inout [UInt8], from start: Int = 0, descriptor: inout Int32?, endAllowed: Bool) throws -> Bool {
        var filled = start
        while filled < buffer.count {
            let (count, received) = try buffer.withUnsafeMutableBytes { bytes in
                try receive(UnsafeMutableRawBufferPointer(rebasing: bytes[filled...]))
            }
            if let received {
                guard descriptor == nil else {
                    try? FileDescriptor(rawValue: received).close()
                    throw AgentProtocolViolation("more than one descriptor with a frame")
                }
                descriptor = received
            }
            if count == 0 {
                if filled == 0 && endAllowed { return false }
                throw AgentProtocolViolation("the stream ended inside a frame")
            }
            filled += count
        }
        return true
    }
}

/// One connection's frames, both ways, over a Unix-domain socket.
final class AgentChannel: Sendable {
    let socket: UnixSocket

    init(_ socket: UnixSocket) {
        self.socket = socket
    }

    /// The next frame (see ``AgentFrameReader/next()``).
    func receive() throws -> (payload: [UInt8], descriptor: FileDescriptor?)? {
        try AgentFrameReader { buffer throws(SocketError) in try self.socket.receive(into: buffer) }.next()
    }

    /// The next frame, calling `wait` before each read (it throws to give up: a deadline, a silent peer).
    func receive(waiting wait: @escaping () throws -> Void) throws -> (payload: [UInt8], descriptor: FileDescriptor?)? {
        try AgentFrameReader { buffer in
            try wait()
            return try self.socket.receive(into: buffer)
        }.next()
    }

    /// Sends one frame, `passing` a descriptor with it (the caller still closes its copy).
    /// `wiping`: the copy made for sending is zeroed afterwards (frames with a passcode).
    func send(_ payload: [UInt8], passing: FileDescriptor? = nil, wiping: Bool = false) throws(SocketError) {
        precondition(!payload.isEmpty && payload.count <= AgentWireFormat.maximumFrameLength)
        let header = withUnsafeBytes(of: UInt32(payload.count).bigEndian) { Array($0) }
        guard payload.count <= 1 << 16 else {
            // A large frame goes as it is, after its header: no copy of the data.
            try socket.send(header, passing: passing?.rawValue)
            try socket.send(payload)
            return
        }
        var frame = header + payload
        defer {
            if wiping { Sodium.wipe(&frame) }
        }
        try socket.send(frame, passing: passing?.rawValue)
    }
}
