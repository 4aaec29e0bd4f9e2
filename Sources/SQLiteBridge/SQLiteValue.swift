import Foundation

/// A SQLite value: what a column holds and what a statement is bound with.
public enum SQLiteValue: Sendable, Hashable {
    /// NULL.
    case null
    /// A 64-bit integer.
    case integer(Int64)
    /// A double-precision real.
    case real(Double)
    /// UTF-8 text.
    case text(String)
    /// Bytes.
    case blob(Data)
}

/// One row of a query: its values and, for each, SQLite's own text conversion of it
/// (`nil` for NULL and blobs), which is how `sqlite3` prints reals (`1.0e+20`, not `1e+20`).
public struct SQLiteRow: Sendable, Hashable {
    /// The values, in column order.
    public let values: [SQLiteValue]
    /// SQLite's text for each value; `nil` for NULL and for blobs.
    public let texts: [String?]
    /// The column names, in order.
    public let columns: [String]

    /// Creates a row.
    public init(values: [SQLiteValue], texts: [String?], columns: [String] = []) {
        self.values = values
        self.texts = texts
        self.columns = columns
    }
}

/// An error from SQLite: its extended result code and message, and the storage error
/// behind it when a VFS call failed (see ``SQLiteVFS/takeLastStorageError()``).
public struct SQLiteError: Error, Sendable, CustomStringConvertible {
    /// SQLite's extended result code.
    public let code: Int32
    /// SQLite's message.
    public let message: String
    /// The error a ``SQLiteStorage`` threw that made SQLite fail, if that is what happened.
    public let storageError: (any Error)?

    /// Creates an error.
    public init(code: Int32, message: String, storageError: (any Error)? = nil) {
        self.code = code
        self.message = message
        self.storageError = storageError
    }

    /// The primary result code (the extended code's low byte).
    public var primaryCode: Int32 { code & 0xFF }

    /// `message (SQLite code N)`.
    public var description: String { "\(message) (SQLite error \(code))" }
}

/// The result codes of SQLite that callers of the bridge match on (without importing SQLite).
public enum SQLiteResultCode {
    /// `SQLITE_IOERR_AUTH`: what the VFS returns when the storage says the data is unavailable now.
    public static let ioErrorAuthorization: Int32 = 10 | (28 << 8)
    /// `SQLITE_IOERR_DATA`: what the VFS returns when the storage finds data tampered with.
    public static let ioErrorData: Int32 = 10 | (32 << 8)

    // The extended I/O codes the VFS returns (macros Swift does not import: `SQLITE_IOERR | (n << 8)`).
    static let ioErrorRead: Int32 = 10 | (1 << 8)
    static let ioErrorShortRead: Int32 = 10 | (2 << 8)
    static let ioErrorWrite: Int32 = 10 | (3 << 8)
    static let ioErrorFsync: Int32 = 10 | (4 << 8)
    static let ioErrorTruncate: Int32 = 10 | (6 << 8)
    static let ioErrorFstat: Int32 = 10 | (7 << 8)
    static let ioErrorDelete: Int32 = 10 | (10 << 8)
    static let ioErrorAccess: Int32 = 10 | (13 << 8)
    static let ioErrorClose: Int32 = 10 | (16 << 8)
    static let ioErrorLock: Int32 = 10 | (15 << 8)
    static let ioErrorShmLock: Int32 = 10 | (20 << 8)
    static let ioErrorShmMap: Int32 = 10 | (21 << 8)
    static let ioErrorDeleteNoEntry: Int32 = 10 | (23 << 8)
}

extension SQLiteRow {
    /// The row as `sqlite3` prints it in list mode, without the newline: columns joined by
    /// `|`, NULL as nothing, numbers and text as SQLite's text, blobs as their bytes. What
    /// `dpctl sql` prints and what a scenario's `<d>.query` expectation is written as.
    public var listModeText: Data {
        var text = Data()
        for (column, value) in values.enumerated() {
            if column > 0 { text.append(UInt8(ascii: "|")) }
            switch value {
            case .null: break
            case .blob(let bytes): text.append(bytes)
            default: text.append(Data((texts[column] ?? "").utf8))
            }
        }
        return text
    }
}

extension SQLiteRow: CustomStringConvertible {
    /// The value of the first column named `column` (SQLite's names match without regard to
    /// ASCII case, as in SQL), or `nil` when the row has no such column.
    public subscript(_ column: String) -> SQLiteValue? {
        if let index = columns.firstIndex(of: column) { return values[index] }
        let folded = column.lowercased()
        return columns.firstIndex { $0.lowercased() == folded }.map { values[$0] }
    }

    /// The value in column `index` (0-based, in the statement's order).
    public subscript(_ index: Int) -> SQLiteValue { values[index] }

    /// `[id: 1, body: "hello", note: NULL]`: each column's name and value (without names,
    /// the values alone).
    public var description: String {
        let fields = values.enumerated().map { index, value in
            index < columns.count ? "\(columns[index]): \(value)" : "\(value)"
        }
        return "[" + fields.joined(separator: ", ") + "]"
    }
}

extension SQLiteValue: CustomStringConvertible {
    /// As SQL would write the value: `NULL`, `42`, `1.5`, `"text"` (quoted), `x'0102'` (a blob's bytes in hex).
    public var description: String {
        switch self {
        case .null: "NULL"
        case .integer(let value): String(value)
        case .real(let value): String(value)
        case .text(let value): "\"" + value + "\""
        case .blob(let bytes): "x'" + bytes.map { String(format: "%02x", $0) }.joined() + "'"
        }
    }

    /// The value as an integer, when it is one.
    public var integerValue: Int64? {
        if case .integer(let value) = self { return value }
        return nil
    }

    /// The value as a real (an integer converted), when it is a number.
    public var doubleValue: Double? {
        switch self {
        case .real(let value): value
        case .integer(let value): Double(value)
        default: nil
        }
    }

    /// The value as text, when it is text.
    public var stringValue: String? {
        if case .text(let value) = self { return value }
        return nil
    }

    /// The value as bytes, when it is a blob.
    public var dataValue: Data? {
        if case .blob(let bytes) = self { return bytes }
        return nil
    }

    /// Whether the value is NULL.
    public var isNull: Bool { self == .null }
}
