import DataProtectionSQLite
import Foundation
import SQLiteBridge

/// The reply to `sql`: every row the statements returned, with their column names,
/// values and SQLite's own text of each value (`Keys/agent-protocol.md` §6).
enum AgentSQLRows {
    static func encode(_ rows: [SQLiteRow]) -> [UInt8] {
        var writer = AgentFieldWriter()
        writer.u32(UInt32(rows.count))
        for row in rows {
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
        return writer.bytes
    }

    static func decode(_ body: [UInt8]) throws(AgentProtocolViolation) -> [SQLiteRow] {
        var reader = AgentFieldReader(body)
        let count = Int(try reader.u32())
        guard count <= body.count else { throw AgentProtocolViolation("\(count) rows in \(body.count) bytes") }
        var rows: [SQLiteRow] = []
        for _ in 0..<count {
            let columns = Int(try reader.u32())
            guard columns <= body.count else { throw AgentProtocolViolation("\(columns) columns in \(body.count) bytes") }
            var names: [String] = [], values: [SQLiteValue] = [], texts: [String?] = []
            for _ in 0..<columns {
                names.append(try reader.string())
                switch try reader.u8() {
                case 0: values.append(.null)
                case 1: values.append(.integer(try reader.i64()))
                case 2: values.append(.real(Double(bitPattern: try reader.u64())))
                case 3: values.append(.text(try text(&reader)))
                case 4: values.append(.blob(Data(try reader.data())))
                case let tag: throw AgentProtocolViolation("SQLite value tag \(tag)")
                }
                texts.append(try reader.optional { reader throws(AgentProtocolViolation) in try text(&reader) })
            }
            rows.append(SQLiteRow(values: values, texts: texts, columns: names))
        }
        try reader.finish()
        return rows
    }

    private static func text(_ reader: inout AgentFieldReader) throws(AgentProtocolViolation) -> String {
        guard let text = String(validating: try reader.data(), as: UTF8.self) else { throw AgentProtocolViolation("SQL text that is not UTF-8") }
        return text
    }
}
