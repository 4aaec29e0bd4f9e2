import DataProtection
@testable import DataProtectionSQLite
import Testing

/// The cap on SQL waiting for its statement's end (issue 32: an unterminated statement grew
/// the agent without bound).
@Suite("SQLStatementReader: the pending-statement cap")
struct SQLStatementReaderLimitTests {
    /// A reader of `chunks`, one per read.
    static func reader(_ chunks: [String], limit: Int) -> SQLStatementReader {
        nonisolated(unsafe) var rest = chunks.map { Array($0.utf8) }
        return SQLStatementReader(limit: limit, reading: { () throws(DataProtectionError) -> [UInt8] in
            rest.isEmpty ? [] : rest.removeFirst()
        })
    }

    @Test("statements up to the cap go through; an open string past it is invalidArgument, its start never handed out")
    func openStringPastTheCap() throws {
        let line = String(repeating: "x", count: 99) + "\n"
        var reader = Self.reader(["select 1;\n", "select '", line, line, line], limit: 256)
        #expect(try reader.next() == "select 1;\n")
        do {
            let sql = try reader.next()
            Issue.record("expected invalidArgument, got \(String(describing: sql?.prefix(40)))")
        } catch {
            #expect(error.code == .invalidArgument, "\(error)")
            #expect(error.message.contains("256 bytes"), "\(error.message)")
        }
    }

    @Test("a statement of exactly the cap is handed out")
    func statementAtTheCap() throws {
        let statement = "select '" + String(repeating: "y", count: 256 - 12) + "';\n"
        #expect(statement.utf8.count == 256 - 1)
        var reader = Self.reader([statement], limit: 256)
        #expect(try reader.next() == statement)
        #expect(try reader.next() == nil)
    }
}
