import DataProtection
import Foundation

/// A handle that lives in the agent: the surface of `ProtectedFileHandle`, following
/// the agent's class rules (a `complete` handle throws `protectedDataUnavailable` once the
/// agent's device has locked, and works again after unlock). Reads and writes larger than
/// a frame go in pieces of ``AgentWireFormat/maximumInlineData``.
public final class AgentFileHandle: ProtectedFileHandling {
    /// What the handle may do.
    public let mode: ProtectedFileHandle.Mode
    let connection: AgentConnection
    let identifier: UInt32

    init(connection: AgentConnection, identifier: UInt32, mode: ProtectedFileHandle.Mode) {
        self.connection = connection
        self.identifier = identifier
        self.mode = mode
    }

    /// Reads up to `count` bytes at the offset and advances it; empty at the end of the file.
    public func read(upToCount count: Int) throws(DataProtectionError) -> Data {
        try read(atOffset: nil, upToCount: count)
    }

    /// Reads from the offset to the end of the file.
    public func readToEnd() throws(DataProtectionError) -> Data {
        var data = Data()
        while case let piece = try read(upToCount: AgentWireFormat.maximumInlineData), !piece.isEmpty {
            data.append(piece)
        }
        return data
    }

    /// Reads up to `count` bytes at `offset` without moving the offset.
    public func read(atOffset offset: UInt64, upToCount count: Int) throws(DataProtectionError) -> Data {
        try read(atOffset: Optional(offset), upToCount: count)
    }

    /// Reads in frame-sized pieces until `count` bytes or a short piece (the end of the file).
    private func read(atOffset offset: UInt64?, upToCount count: Int) throws(DataProtectionError) -> Data {
        guard count >= 0 else { throw DataProtectionError(.invalidArgument, "Cannot read a negative number of bytes.") }
        var data = Data()
        repeat {
            let want = min(count - data.count, AgentWireFormat.maximumInlineData)
            let position = offset.map { $0 + UInt64(data.count) }
            let piece = try AgentStore.decode(
                try connection.call(.read(handle: identifier, offset: position, count: UInt32(want))), AgentReply.data)
            data.append(piece)
            if piece.count < want { break }
        } while data.count < count
        return data
    }

    /// Writes at the offset (in append mode: at the end) and advances it.
    public func write<D: DataProtocol>(contentsOf data: D) throws(DataProtectionError) {
        try write(Data(data), atOffset: nil)
    }

    /// Writes at `offset` without moving the offset.
    public func write<D: DataProtocol>(contentsOf data: D, atOffset offset: UInt64) throws(DataProtectionError) {
        try write(Data(data), atOffset: offset)
    }

    private func write(_ data: Data, atOffset offset: UInt64?) throws(DataProtectionError) {
        var start = 0
        repeat {
            let end = min(data.count, start + AgentWireFormat.maximumInlineData)
            let position = offset.map { $0 + UInt64(start) }
            try empty(.write(handle: identifier, offset: position, data: data.subdata(in: start..<end)))
            start = end
        } while start < data.count
    }

    /// Cuts or extends the file to `offset` bytes.
    public func truncate(atOffset offset: UInt64) throws(DataProtectionError) {
        try empty(.truncate(handle: identifier, offset: offset))
    }

    /// Makes every write so far durable.
    public func synchronize() throws(DataProtectionError) {
        try empty(.synchronize(handle: identifier))
    }

    /// The handle's offset.
    public func offset() throws(DataProtectionError) -> UInt64 {
        try AgentStore.decode(try connection.call(.offset(handle: identifier)), AgentReply.u64)
    }

    /// Moves the offset.
    public func seek(toOffset offset: UInt64) throws(DataProtectionError) {
        try empty(.seek(handle: identifier, offset: offset))
    }

    /// Moves the offset to the end of the file and returns it.
    public func seekToEnd() throws(DataProtectionError) -> UInt64 {
        try AgentStore.decode(try connection.call(.seekToEnd(handle: identifier)), AgentReply.u64)
    }

    /// The file's size.
    public func size() throws(DataProtectionError) -> UInt64 {
        try AgentStore.decode(try connection.call(.size(handle: identifier)), AgentReply.u64)
    }

    /// Flushes and closes the handle.
    public func close() throws(DataProtectionError) {
        try empty(.close(handle: identifier))
    }

    private func empty(_ request: AgentRequest) throws(DataProtectionError) {
        try AgentStore.decode(try connection.call(request), AgentReply.empty)
    }
}
