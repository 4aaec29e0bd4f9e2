/// Where a statement comes from: a line of a `.scenario` file, or a call in Swift.
public struct ScenarioLocation: Sendable, Hashable, Codable, CustomStringConvertible {
    /// The file as it is shown in reports: the path given for a scenario file,
    /// `#fileID` for a Swift ``Timeline`` step.
    public var file: String
    /// 1-based line.
    public var line: Int
    /// 1-based column (in Unicode scalars; a tab counts as one).
    public var column: Int
    /// For Swift steps: `#filePath`, so test frameworks can point at the call.
    public var filePath: String?

    /// A position in a scenario file (`filePath`: the full path, when known).
    public init(file: String, line: Int, column: Int = 1, filePath: String? = nil) {
        self.file = file
        self.line = line
        self.column = column
        self.filePath = filePath
    }

    /// `file:line`.
    public var description: String { "\(file):\(line)" }
}
