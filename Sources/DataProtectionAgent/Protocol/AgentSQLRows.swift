import DataProtectionSQLite
import Foundation
import SQLiteBridge

/// Rows on the wire: the reply to `sql` (every row the statements returned) and each row
/// piece of `sqlStream`, with their column names, values and SQLite's own text of each
/// value (`Keys/agent-protocol.md` §6).
enum AgentSQLRows {
    /// Where a row piece's count would be: the piece reports a statement that failed (then a
    /// `failure` response's payload, §5), in a stream that goes on.
    static let failureMark: [UInt8] = [0xFF, 0xFF, 0xFF, 0xFF]

    static func encode(_ rows: [SQLiteRow]) -> [UInt8] {
        var writer = AgentFieldWriter()
        writer.u32(UInt32(rows.count))
        for row in rows { encode(row, into: &writer) }
        return writer.bytes
    }

    /// Appends one row (its columns, then each column's name, type, value and text).
    static func encode(_ row: SQLiteRow, into writer: inout AgentFieldWriter) {
        writer.u32(UInt32(row.values.count))
        for (index, value) in row.values.enumerated() {
            writer.string(index < row.columns.count ? row.columns[index] : "")
            switch value {
            case .null: writer.u8(0)
            case .integer(let number):
                writer.u8(1)
                writer.i64(number)
            case .real(let number):
                writer.u8(2)
                writer.u64(number.bitPattern)
            case .text(let text):
                writer.u8(3)
                writer.data(Array(text.utf8))
            case .blob(let bytes):
                writer.u8(4)
                writer.data(bytes)
            }
            writer.optional(index < row.texts.count ? row.texts[index] : nil) { $0.data(Array($1.utf8)) }
        }
    }

    /// Decodes a reply body, or a row piece of `sqlStream` (`fieldLimit`: the body's length,
    /// no field being bounded there but by its piece).
    static func decode(_ body: [UInt8], fieldLimit: Int? = nil) throws(AgentProtocolViolation) -> [SQLiteRow] {
        let names = fieldLimit ?? AgentWireFormat.maximumStringLength
        let values = fieldLimit ?? AgentWireFormat.maximumInlineData
        var reader = AgentFieldReader(body)
        let count = Int(try reader.u32())
        guard count <= body.count else { throw AgentProtocolViolation("\(count) rows in \(body.count) bytes") }
        var rows: [SQLiteRow] = []
        for _ in 0..<count {
            let columns = Int(try reader.u32())
            guard columns <= body.count else { throw AgentProtocolViolation("\(columns) columns in \(body.count) bytes") }
            var columnNames: [String] = [], rowValues: [SQLiteValue] = [], texts: [String?] = []
            for _ in 0..<columns {
                columnNames.append(try text(&reader, limit: names))
                switch try reader.u8() {
                case 0: rowValues.append(.null)
                case 1: rowValues.append(.integer(try reader.i64()))
                case 2: rowValues.append(.real(Double(bitPattern: try reader.u64())))
                case 3: rowValues.append(.text(try text(&reader, limit: values)))
                case 4: rowValues.append(.blob(Data(try reader.data(limit: values))))
                case let tag: throw AgentProtocolViolation("SQLite value tag \(tag)")
                }
                texts.append(try reader.optional { reader throws(AgentProtocolViolation) in try text(&reader, limit: values) })
            }
            rows.append(SQLiteRow(values: rowValues, texts: texts, columns: columnNames))
        }
        try reader.finish()
        return rows
    }

    private static func text(_ reader: inout AgentFieldReader, limit: Int) throws(AgentProtocolViolation) -> String {
        guard let text = String(validating: try reader.data(limit: limit), as: UTF8.self) else { throw AgentProtocolViolation("SQL text that is not UTF-8") }
        return text
    }
}
