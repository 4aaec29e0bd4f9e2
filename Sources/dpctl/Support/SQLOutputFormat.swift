import DataProtectionSQLite
import Foundation

/// How `dpctl sql` prints rows: the output modes of `sqlite3` (3.40) that `.mode` chooses,
/// byte for byte, and `.headers`. Rows go in one at a time; a statement's end is told
/// (``endStatement()``), since `column` needs every row of a statement to size its columns,
/// `json` closes its array there, and headers are printed once per statement.
struct SQLOutputFormat {
    /// The modes `.mode` accepts.
    enum Mode: String, CaseIterable {
        case list, csv, json, line, column

        /// The mode `name` spells (a prefix of `lines` or `columns` too, as in `sqlite3`).
        init?(spelling name: String) {
            switch name {
            case "list": self = .list
            case "csv": self = .csv
            case "json": self = .json
            case _ where name.count >= 3 && "lines".hasPrefix(name): self = .line
            case _ where name.count >= 3 && "columns".hasPrefix(name): self = .column
            default: return nil
            }
        }
    }

    private(set) var mode: Mode = .list
    private(set) var headers = false
    /// Whether `.headers` was given: then `.mode column` leaves the headers as they are.
    private var headersSet = false

    /// Rows seen in the current statement.
    private var rowsInStatement = 0
    /// The rows of the current statement, in `column` mode (its widths need them all).
    private var pending: [[String]] = []
    private var pendingColumns: [String] = []

    /// Whether statements must be told apart: false only in list mode without headers, where
    /// a script's rows can go as they come, whatever statement they belong to.
    var needsStatementBoundaries: Bool { mode != .list || headers }

    /// `.mode`: `column` turns headers on unless `.headers` was given.
    mutating func setMode(_ mode: Mode) {
        self.mode = mode
        if mode == .column && !headersSet { headers = true }
    }

    /// `.headers on|off`.
    mutating func setHeaders(_ on: Bool) {
        headers = on
        headersSet = true
    }

    /// The bytes to print for `row`.
    mutating func format(_ row: SQLiteRow) -> Data {
        defer { rowsInStatement += 1 }
        var out = Data()
        let first = rowsInStatement == 0
        switch mode {
        case .list:
            if first && headers { out.append(Self.joined(row.columns.map { Data($0.utf8) }, "|", end: "\n")) }
            for index in row.values.indices {
                if index > 0 { out.append(UInt8(ascii: "|")) }
                Self.appendCString(row, index, to: &out)
            }
            out.append(0x0A)
        case .csv:
            if first && headers { out.append(Self.joined(row.columns.map { Self.csvField(Data($0.utf8)) }, ",", end: "\r\n")) }
            out.append(Self.joined(row.values.indices.map { index in
                if case .null = row.values[index] { return Data() }
                return Self.csvField(Self.cString(row, index))
            }, ",", end: "\r\n"))
        case .json:
            out.append(Data((first ? "[{" : ",\n{").utf8))
            for index in row.values.indices {
                if index > 0 { out.append(UInt8(ascii: ",")) }
                out.append(Self.jsonString(Data(row.columns[index].utf8)))
                out.append(UInt8(ascii: ":"))
                out.append(Self.jsonValue(row, index))
            }
            out.append(UInt8(ascii: "}"))
        case .line:
            if !first { out.append(0x0A) }
            let width = max(5, row.columns.map(\.utf8.count).max() ?? 0)
            for index in row.values.indices {
                let name = row.columns[index]
                out.append(Data((String(repeating: " ", count: max(0, width - name.utf8.count)) + name + " = ").utf8))
                out.append(Self.cString(row, index))
                out.append(0x0A)
            }
        case .column:
            if first { pendingColumns = row.columns }
            pending.append(row.values.indices.map { index in
                Self.expandingTabs(String(decoding: Self.cString(row, index), as: UTF8.self))
            })
        }
        return out
    }

    /// What ends the current statement's output (the `column` table, the end of the JSON array).
    mutating func endStatement() -> Data {
        defer {
            rowsInStatement = 0
            pending = []
            pendingColumns = []
        }
        switch mode {
        case .json: return rowsInStatement > 0 ? Data("]\n".utf8) : Data()
        case .column: return columnTable()
        default: return Data()
        }
    }

    /// `column` mode: every column as wide as its widest value or name, two spaces
    /// apart, each value left-aligned and padded (the last one too); a value of several
    /// lines takes several rows, and then rows are set apart by a blank line.
    private func columnTable() -> Data {
        guard !pending.isEmpty else { return Data() }
        let cells = pending.map { $0.map { $0.split(separator: "\n", omittingEmptySubsequences: false).map(String.init) } }
        var widths = pendingColumns.map(Self.displayWidth)  // the names count, shown or not
        for row in cells {
            for (index, lines) in row.enumerated() {
                for line in lines { widths[index] = max(widths[index], Self.displayWidth(line)) }
            }
        }
        let multiline = cells.contains { $0.contains { $0.count > 1 } }
        var text = ""
        func line(_ values: [String]) {
            text += zip(values, widths).map { $0 + String(repeating: " ", count: max(0, $1 - Self.displayWidth($0))) }
                .joined(separator: "  ") + "\n"
        }
        if headers {
            line(pendingColumns)
            line(widths.map { String(repeating: "-", count: $0) })
        }
        for (number, row) in cells.enumerated() {
            if multiline && number > 0 { text += "\n" }
            let height = row.map(\.count).max() ?? 1
            for level in 0..<height { line(row.map { level < $0.count ? $0[level] : "" }) }
        }
        return Data(text.utf8)
    }

    // MARK: - Values as sqlite3 prints them

    /// The value as `sqlite3` prints it in the text modes: SQLite's text of it, a blob's
    /// bytes up to the first NUL (it is printed as a C string), NULL as nothing.
    private static func cString(_ row: SQLiteRow, _ index: Int) -> Data {
        var out = Data()
        appendCString(row, index, to: &out)
        return out
    }

    /// Appends ``cString(_:_:)`` to `out` (searched with memchr(3): a row's text is scanned once).
    private static func appendCString(_ row: SQLiteRow, _ index: Int, to out: inout Data) {
        func append(_ bytes: UnsafeRawBufferPointer) {
            guard let base = bytes.baseAddress, !bytes.isEmpty else { return }
            let count = memchr(base, 0, bytes.count).map { UnsafeRawPointer($0) - base } ?? bytes.count
            out.append(base.assumingMemoryBound(to: UInt8.self), count: count)
        }
        switch row.values[index] {
        case .null: return
        case .blob(let bytes): bytes.withUnsafeBytes(append)
        case .text(var text): text.withUTF8 { append(UnsafeRawBufferPointer($0)) }
        default:
            guard var text = row.texts[index] else { return }
            text.withUTF8 { append(UnsafeRawBufferPointer($0)) }
        }
    }

    private static func joined(_ fields: [Data], _ separator: String, end: String) -> Data {
        var out = Data()
        for (index, field) in fields.enumerated() {
            if index > 0 { out.append(Data(separator.utf8)) }
            out.append(field)
        }
        out.append(Data(end.utf8))
        return out
    }

    /// A CSV field: quoted (inner quotes doubled) when empty or holding a control character,
    /// a space, `"`, `'`, `,` or a byte of 0x7F or more, as `sqlite3` decides.
    private static func csvField(_ bytes: Data) -> Data {
        let quote = bytes.isEmpty || bytes.contains { $0 <= 0x20 || $0 == 0x22 || $0 == 0x27 || $0 == 0x2C || $0 >= 0x7F }
        guard quote else { return bytes }
        var out = Data([0x22])
        for byte in bytes {
            out.append(byte)
            if byte == 0x22 { out.append(0x22) }
        }
        out.append(0x22)
        return out
    }

    /// A JSON value as `sqlite3` prints it: numbers bare (reals with 20 significant digits),
    /// text and blobs as strings (a blob's bytes as they are), NULL as `null`.
    private static func jsonValue(_ row: SQLiteRow, _ index: Int) -> Data {
        switch row.values[index] {
        case .null: return Data("null".utf8)
        case .integer(let number): return Data(String(number).utf8)
        case .real(let number): return Data(realText(number).utf8)
        case .text(let text): return jsonString(Data(text.utf8))
        case .blob(let bytes): return jsonString(bytes)
        }
    }

    /// A real as SQLite's `%!.20g` spells it: 20 significant digits, a `.0` where the
    /// number would have no point (`3.0`, `1.0e+20`); infinities as `1e999` and `-1e999`.
    static func realText(_ number: Double) -> String {
        if number == .infinity { return "1e999" }
        if number == -.infinity { return "-1e999" }
        var text = String(format: "%.20g", number)
        guard !text.contains("."), !text.contains("n") else { return text }  // `nan`, `inf` are not SQLite values
        if let exponent = text.firstIndex(of: "e") {
            text.insert(contentsOf: ".0", at: exponent)
        } else {
            text += ".0"
        }
        return text
    }

    /// A JSON string as `sqlite3` writes it: `"` and `\` escaped, control characters as
    /// `\b \f \n \r \t` or `\u00XX`, every other byte as it is.
    private static func jsonString(_ bytes: Data) -> Data {
        var out = Data([0x22])
        for byte in bytes {
            switch byte {
            case 0x22, 0x5C: out.append(contentsOf: [0x5C, byte])
            case 0x08: out.append(contentsOf: Array("\\b".utf8))
            case 0x0C: out.append(contentsOf: Array("\\f".utf8))
            case 0x0A: out.append(contentsOf: Array("\\n".utf8))
            case 0x0D: out.append(contentsOf: Array("\\r".utf8))
            case 0x09: out.append(contentsOf: Array("\\t".utf8))
            case 0x00...0x1F: out.append(contentsOf: Array(String(format: "\\u%04x", byte).utf8))
            default: out.append(byte)
            }
        }
        out.append(0x22)
        return out
    }

    /// Tabs expanded to the next multiple of 8, as `sqlite3`'s column mode shows them.
    private static func expandingTabs(_ text: String) -> String {
        guard text.contains("\t") else { return text }
        var out = ""
        var column = 0
        for character in text {
            if character == "\t" {
                let spaces = 8 - column % 8
                out += String(repeating: " ", count: spaces)
                column += spaces
            } else if character == "\n" {
                out.append(character)
                column = 0
            } else {
                out.append(character)
                column += 1
            }
        }
        return out
    }

    /// The width `sqlite3` (3.40) gives `text` in column mode: its characters (UTF-8
    /// sequences), whatever room they take on a terminal.
    static func displayWidth(_ text: String) -> Int {
        text.unicodeScalars.count
    }
}
