import Foundation

/// SQL typed at a terminal, a line at a time, edited (``LineEditor``), after a prompt as
/// `sqlite3` shows them: `sql> ` for a new statement, `...> ` inside one (a string, a
/// comment, a trigger's body, or a statement without its semicolon yet).
final class SQLPrompt: @unchecked Sendable {
    private let editor: LineEditor

    /// A prompt when standard input and output are a terminal; `nil` otherwise.
    init?() {
        guard let editor = LineEditor() else { return nil }
        self.editor = editor
    }

    /// Raw mode for the session (``LineEditor/start()``), with a line that says how to leave.
    func start(database path: String) {
        print("SQL on \(path) in the store: statements end with \";\", \".help\" lists the dot-commands, Ctrl-D leaves.")
        fflush(nil)
        editor.start()
    }

    func finish() { editor.finish() }

    /// The next line typed, without its newline; `nil` at the end of input (Ctrl-D on an
    /// empty line). `continuing`: inside a statement (the `...> ` prompt).
    func nextLine(continuing: Bool) -> String? {
        fflush(nil)
        return editor.readLine(prompt: continuing ? "...> " : "sql> ")
    }
}
