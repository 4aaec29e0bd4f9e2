import DataProtection
import DataProtectionSQLite
import Foundation

/// The dot-commands of `dpctl sql`, those of `sqlite3` a newcomer reaches for first, with
/// its output: `.tables`, `.schema`, `.headers`, `.mode`, `.read`, `.help`, `.quit`, `.exit`.
/// `.tables` and `.schema` are queries of the schema, run where the database is (here or in
/// the agent); their rows are printed here as `sqlite3` prints them.
enum SQLDotCommand: Equatable {
    /// `.tables ?PATTERN?`: the tables and views (not SQLite's own) whose name is `LIKE` the pattern.
    case tables(pattern: String?)
    /// `.schema ?PATTERN?`: the `CREATE` statements, of the tables `LIKE` the pattern (`GLOB`
    /// when it holds `*`, `?` or `[`) and of their indexes and triggers.
    case schema(pattern: String?)
    /// `.headers on|off`.
    case headers(Bool)
    /// `.mode MODE`; `nil`: show the current mode.
    case mode(SQLOutputFormat.Mode?)
    /// `.read FILE`.
    case read(String)
    case help
    /// `.quit`, `.exit ?CODE?`.
    case quit(status: Int32)

    /// What `.help` prints.
    static let helpText = """
        .exit ?CODE?             Exit this program with return-code CODE
        .headers on|off          Turn display of headers on or off
        .help                    Show this message
        .mode MODE               Set output mode: column, csv, json, line or list
        .quit                    Exit this program
        .read FILE               Read input from FILE
        .schema ?PATTERN?        Show the CREATE statements matching PATTERN
        .tables ?TABLE?          List names of tables matching LIKE pattern TABLE

        """

    /// The command on `line` (which starts with `.`); `invalidArgument` for one this does not know or bad arguments.
    static func parse(_ line: String) throws(DataProtectionError) -> SQLDotCommand {
        let words = arguments(of: line.dropFirst())
        guard let name = words.first else { throw unknown(line) }
        let rest = Array(words.dropFirst())
        switch name {
        case "tables" where rest.count <= 1:
            return .tables(pattern: rest.first)
        case "schema" where rest.count <= 1:
            return .schema(pattern: rest.first)
        case "headers", "header":
            guard rest.count == 1 else { throw DataProtectionError(.invalidArgument, "Usage: .headers on|off") }
            return .headers(try boolean(rest[0]))
        case "mode" where rest.count <= 1:
            guard let spelling = rest.first else { return .mode(nil) }
            guard let mode = SQLOutputFormat.Mode(spelling: spelling) else {
                throw DataProtectionError(.invalidArgument, "Mode should be one of: column csv json line list (not \"\(spelling)\").")
            }
            return .mode(mode)
        case "read":
            guard rest.count == 1 else { throw DataProtectionError(.invalidArgument, "Usage: .read FILE") }
            return .read(rest[0])
        case "help":
            return .help
        case "quit" where rest.isEmpty:
            return .quit(status: 0)
        case "exit" where rest.count <= 1:
            guard let code = rest.first else { return .quit(status: 0) }
            guard let status = Int32(code) else { throw unknown(line) }
            return .quit(status: status)
        default:
            throw unknown(line)
        }
    }

    /// The query whose rows ``output(of:)`` prints (`.tables`, `.schema`).
    var query: String? {
        switch self {
        case .tables(let pattern):
            return "SELECT name FROM sqlite_schema WHERE type IN ('table','view') AND name NOT LIKE 'sqlite_%'"
                + (pattern.map { " AND name LIKE \(Self.literal($0))" } ?? "") + " ORDER BY 1;\n"
        case .schema(let pattern):
            // A view's statement is followed by its columns, as `sqlite3` shows them.
            let filter = pattern.map { pattern in
                let glob = pattern.contains { "*?[".contains($0) }
                return " AND lower(tbl_name) \(glob ? "GLOB" : "LIKE") \(Self.literal(glob ? pattern : pattern.lowercased()))"
            } ?? ""
            return """
                SELECT sql, type, name, CASE WHEN type = 'view' THEN \
                (SELECT json_group_array(p.name) FROM pragma_table_info(s.name) AS p) END \
                FROM sqlite_schema AS s WHERE sql NOTNULL\(filter) ORDER BY rowid;

                """
        default:
            return nil
        }
    }

    /// What the command prints, given the rows of its ``query``.
    func output(of rows: [SQLiteRow]) throws(DataProtectionError) -> String {
        switch self {
        case .tables:
            // In columns down then across, as wide as the longest name, as many as fit in 80.
            let names = rows.map { Self.text($0, 0) }
            guard !names.isEmpty else { return "" }
            let width = names.map(\.utf8.count).max() ?? 0  // bytes, as `sqlite3` pads them
            let columns = max(1, 80 / (width + 2))
            let lines = (names.count + columns - 1) / columns
            var text = ""
            for line in 0..<lines {
                for index in stride(from: line, to: names.count, by: lines) {
                    if index >= lines { text += "  " }
                    text += names[index] + String(repeating: " ", count: width - names[index].utf8.count)
                }
                text += "\n"
            }
            return text
        case .schema:
            var text = ""
            for row in rows {
                text += Self.text(row, 0)
                if Self.text(row, 1) == "view", let data = Self.text(row, 3).data(using: .utf8),
                   let columns = try? JSONSerialization.jsonObject(with: data) as? [String], !columns.isEmpty {
                    text += "\n/* \(Self.quoted(Self.text(row, 2)))(\(columns.map(Self.quoted).joined(separator: ","))) */"
                }
                text += ";\n"
            }
            return text
        default:
            return ""
        }
    }

    // MARK: -

    private static func text(_ row: SQLiteRow, _ index: Int) -> String {
        guard index < row.values.count, case .text(let text) = row.values[index] else { return "" }
        return text
    }

    private static func unknown(_ line: String) -> DataProtectionError {
        DataProtectionError(.invalidArgument, "Unknown command or invalid arguments: \"\(line.dropFirst().trimmingCharacters(in: .whitespacesAndNewlines))\".",
                            hint: "Enter \".help\" for help.")
    }

    /// `on`, `yes`, `true` or a non-zero number; `off`, `no`, `false` or zero.
    private static func boolean(_ word: String) throws(DataProtectionError) -> Bool {
        switch word.lowercased() {
        case "on", "yes", "true": return true
        case "off", "no", "false": return false
        default:
            guard let number = Int(word) else { throw DataProtectionError(.invalidArgument, "Not a boolean value: \"\(word)\".") }
            return number != 0
        }
    }

    /// The words of a command line: split at blanks, `'…'` or `"…"` kept whole (without the quotes).
    private static func arguments(of line: Substring) -> [String] {
        var words: [String] = []
        var index = line.startIndex
        while index < line.endIndex {
            if line[index].isWhitespace {
                index = line.index(after: index)
                continue
            }
            if line[index] == "'" || line[index] == "\"" {
                let quote = line[index]
                let start = line.index(after: index)
                let end = line[start...].firstIndex(of: quote) ?? line.endIndex
                words.append(String(line[start..<end]))
                index = end < line.endIndex ? line.index(after: end) : end
            } else {
                let end = line[index...].firstIndex(where: \.isWhitespace) ?? line.endIndex
                words.append(String(line[index..<end]))
                index = end
            }
        }
        return words
    }

    /// `text` as an SQL string literal.
    private static func literal(_ text: String) -> String {
        "'" + text.replacingOccurrences(of: "'", with: "''") + "'"
    }

    /// A name as `sqlite3` writes it in a schema comment: bare when it is a plain identifier
    /// and not a keyword, else in double quotes.
    private static func quoted(_ name: String) -> String {
        let plain = name.first.map { $0.isASCII && ($0.isLetter || $0 == "_") } == true
            && name.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "_") }
        if plain && !keywords.contains(name.uppercased()) { return name }
        return "\"" + name.replacingOccurrences(of: "\"", with: "\"\"") + "\""
    }

    /// SQLite's keywords (`sqlite3_keyword_name`).
    private static let keywords: Set<String> = Set("""
        ABORT ACTION ADD AFTER ALL ALTER ALWAYS ANALYZE AND AS ASC ATTACH AUTOINCREMENT BEFORE BEGIN BETWEEN BY CASCADE \
        CASE CAST CHECK COLLATE COLUMN COMMIT CONFLICT CONSTRAINT CREATE CROSS CURRENT CURRENT_DATE CURRENT_TIME \
        CURRENT_TIMESTAMP DATABASE DEFAULT DEFERRABLE DEFERRED DELETE DESC DETACH DISTINCT DO DROP EACH ELSE END ESCAPE \
        EXCEPT EXCLUDE EXCLUSIVE EXISTS EXPLAIN FAIL FILTER FIRST FOLLOWING FOR FOREIGN FROM FULL GENERATED GLOB GROUP \
        GROUPS HAVING IF IGNORE IMMEDIATE IN INDEX INDEXED INITIALLY INNER INSERT INSTEAD INTERSECT INTO IS ISNULL JOIN \
        KEY LAST LEFT LIKE LIMIT MATCH MATERIALIZED NATURAL NO NOT NOTHING NOTNULL NULL NULLS OF OFFSET ON OR ORDER \
        OTHERS OUTER OVER PARTITION PLAN PRAGMA PRECEDING PRIMARY QUERY RAISE RANGE RECURSIVE REFERENCES REGEXP REINDEX \
        RELEASE RENAME REPLACE RESTRICT RETURNING RIGHT ROLLBACK ROW ROWS SAVEPOINT SELECT SET TABLE TEMP TEMPORARY THEN \
        TIES TO TRANSACTION TRIGGER UNBOUNDED UNION UNIQUE UPDATE USING VACUUM VALUES VIEW VIRTUAL WHEN WHERE WINDOW WITH \
        WITHOUT
        """.split(separator: " ").map(String.init))
}
