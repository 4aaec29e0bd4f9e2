import DataProtection
import Foundation

/// The SQL on an input (standard input, or a client's stream to the agent), read as `sqlite3`
/// reads it: line by line, what was read handed out up to the last line that ends after a
/// semicolon where the statements are complete (``ProtectedDatabase/isComplete(_:)``: not inside
/// a string, a comment or a trigger's body). That happens once ``batchBytes`` are gathered, and
/// always before a read that may wait: a script of any size runs in the memory of a batch and
/// its longest statement, and in an interactive session each statement runs once its line is typed.
package struct SQLStatementReader {
    /// How many bytes are gathered before the complete statements among them are handed out
    /// (one `execute` per statement, and a completeness check each, cost some 30 % of the
    /// CPU of a script of one-row inserts).
    static let batchBytes = 1 << 16
    /// The most bytes of SQL waiting for its statement to be complete (64 MiB): a longer
    /// statement, or one never terminated, is `invalidArgument` rather than memory without end.
    package static let maximumPendingBytes = 64 << 20

    /// The next bytes of the input, as one read returns them: empty at its end.
    private let read: () throws(DataProtectionError) -> [UInt8]
    /// The last read from the input, and how far it is split into lines.
    private var block: [UInt8] = []
    private var position = 0
    /// The lines gathered, and where among them a line ended after a semicolon: where the
    /// statements before may be complete.
    private var pending: [UInt8] = []
    private var candidates: [Int] = []
    private var semicolonSeen = false
    private var ended = false
    /// The most bytes pending (``maximumPendingBytes`` unless told).
    private let limit: Int

    /// A reader of `input` (its bytes as each read returns them).
    package init(_ input: FileHandle, limit: Int = Self.maximumPendingBytes) {
        self.read = { [UInt8](input.availableData) }
        self.limit = limit
    }

    /// A reader of what `read` returns, read after read (empty: the end of the input), with at
    /// most `limit` bytes waiting for a statement's end.
    package init(limit: Int = Self.maximumPendingBytes, reading read: @escaping () throws(DataProtectionError) -> [UInt8]) {
        self.read = read
        self.limit = limit
    }

    /// The next complete statements, or at the end of the input what is left if not only
    /// blanks (run as it is: SQLite takes a last statement without its semicolon); `nil` once
    /// everything was handed out.
    package mutating func next() throws(DataProtectionError) -> String? {
        while true {
            if position == block.count || pending.count >= Self.batchBytes, let sql = try takeComplete() {
                return sql
            }
            if position == block.count {
                if ended { break }
                block = try read()  // what one read returns; empty at the end
                position = 0
                if block.isEmpty { ended = true }
                continue
            }
            // Searched with memchr(3): a loop over the bytes costs ten instructions each.
            let (newline, semicolon) = block.withUnsafeBytes { bytes in
                let start = bytes.baseAddress! + position
                let newline = memchr(start, 0x0A, bytes.count - position).map { UnsafeRawPointer($0) - bytes.baseAddress! }
                let lineEnd = newline.map { $0 + 1 } ?? bytes.count
                return (newline, memchr(start, 0x3B, lineEnd - position) != nil)
            }
            let end = newline.map { $0 + 1 } ?? block.count
            guard pending.count + (end - position) <= limit else {
                pending = []
                candidates.removeAll()
                throw DataProtectionError(
                    .invalidArgument, "A statement is longer than \(Self.spelled(limit)), or never ends (an open string, comment or trigger body).",
                    hint: "Split it, or end it: statements run once complete, each up to \(Self.spelled(limit)).")
            }
            pending.append(contentsOf: block[position..<end])
            position = end
            if semicolon { semicolonSeen = true }
            if newline != nil, semicolonSeen {
                semicolonSeen = false
                candidates.append(pending.count)
            }
        }
        guard !pending.isEmpty else { return nil }
        defer { pending = [] }
        let rest = try Self.text(pending[...])
        return rest.allSatisfy(\.isWhitespace) ? nil : rest
    }

    /// The statements gathered up to the last candidate line end where they are complete,
    /// removed from what is pending; `nil` when there is none (the candidates are then
    /// dropped: a later semicolon makes new ones).
    private mutating func takeComplete() throws(DataProtectionError) -> String? {
        while let split = candidates.popLast() {
            let sql = try Self.text(pending[..<split])
            guard ProtectedDatabase.isComplete(sql) else { continue }
            pending.removeFirst(split)  // what is left: the start of the next statement
            candidates.removeAll()  // inside the statements handed out
            return sql
        }
        return nil
    }

    private static func spelled(_ bytes: Int) -> String {
        bytes >= 1 << 20 && bytes % (1 << 20) == 0 ? "\(bytes >> 20) MiB" : "\(bytes) bytes"
    }

    private static func text(_ bytes: ArraySlice<UInt8>) throws(DataProtectionError) -> String {
        guard let text = String(validating: bytes, as: UTF8.self) else {
            throw DataProtectionError(.invalidArgument, "The SQL read is not UTF-8.")
        }
        return text
    }
}
