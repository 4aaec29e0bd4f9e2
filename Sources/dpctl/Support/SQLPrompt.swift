import DataProtectionSQLite
import Foundation

/// SQL typed at a terminal, a line at a time, edited (``LineEditor``), after a prompt as
/// `sqlite3` shows them: `sql> ` for a new statement, `...> ` inside one (a string, a
/// comment, a trigger's body, or a statement without its semicolon yet).
final class SQLPrompt: @unchecked Sendable {
    private let editor: LineEditor
    /// What was typed since the last complete statement.
    private var statement = ""

    /// A prompt when standard input and output are a terminal; `nil` otherwise.
    init?() {
        guard let editor = LineEditor() else { return nil }
        self.editor = editor
    }

    /// Raw mode for the session (``LineEditor/start()``), with a line that says how to leave.
    func start(database path: String) {
        print("SQL on \(path) in the store: statements end with \";\", Ctrl-D leaves.")
        fflush(nil)
        editor.start()
    }

    func finish() { editor.finish() }

    /// The next line typed, with its newline; `nil` at the end of input (Ctrl-D on an empty line).
    func nextLine() -> Data? {
        fflush(nil)
        let fresh = statement.allSatisfy(\.isWhitespace)
        guard let line = editor.readLine(prompt: fresh ? "sql> " : "...> ") else { return nil }
        statement += line + "\n"
        if ProtectedDatabase.isComplete(statement) { statement = "" }
        return Data((line + "\n").utf8)
    }
}
