/// A scenario file that does not follow the language: where, what was expected, what was found.
public struct ScenarioSyntaxError: Error, Sendable, Hashable, Codable, CustomStringConvertible {
    /// The file as named in reports.
    public var file: String
    /// 1-based line.
    public var line: Int
    /// 1-based column (in Unicode scalars; a tab counts as one).
    public var column: Int
    /// What the language allows there, e.g. "a duration such as 10s (units ms, s, m, h, d)".
    public var expected: String
    /// What is there instead, e.g. `"10x"` or `end of line`.
    public var found: String

    /// A syntax error at `file:line:column`: what was expected and what was found.
    public init(file: String, line: Int, column: Int, expected: String, found: String) {
        self.file = file
        self.line = line
        self.column = column
        self.expected = expected
        self.found = found
    }

    /// `file:line:column`.
    public var location: String { "\(file):\(line):\(column)" }

    /// `expected …, found …`.
    public var message: String { "expected \(expected), found \(found)" }

    /// `file:line:column: expected …, found …`.
    public var description: String { "\(location): \(message)" }
}
