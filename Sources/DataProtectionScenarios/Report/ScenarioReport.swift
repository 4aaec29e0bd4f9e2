import Foundation

/// The results of a run: one ``ScenarioResult`` per scenario (or per file that could not run).
public struct ScenarioReport: Sendable, Hashable, Codable {
    /// In the order the scenarios were given.
    public var results: [ScenarioResult]

    /// A report of `results`.
    public init(results: [ScenarioResult] = []) { self.results = results }

    /// How many passed.
    public var passed: Int { results.count { $0.passed } }
    /// How many failed (a scenario with a syntax error counts as one).
    public var failed: Int { results.count { !$0.passed } }
    /// Whether nothing failed.
    public var succeeded: Bool { failed == 0 }
    /// The failed results.
    public var failures: [ScenarioResult] { results.filter { !$0.passed } }

    /// The runner's text output: one line per scenario, then `<N> passed, <M> failed`.
    public var text: String {
        (results.map(\.summary) + ["\(passed) passed, \(failed) failed"]).joined(separator: "\n") + "\n"
    }

    /// The same as JSON: `{"passed": N, "failed": M, "scenarios": [...]}`, each scenario with
    /// its `title`, `status` (`pass`/`fail`), `file`, `line`, the output `summary`, and for a
    /// failure its `kind`, `file`, `line`, `column`, `statement`, `expected` and `actual`.
    public func json() -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        // Encoding plain structs of strings and integers cannot fail.
        return (try? encoder.encode(self)) ?? Data("{}".utf8)
    }

    // MARK: - Codable

    private enum CodingKeys: String, CodingKey { case passed, failed, scenarios }

    private struct Entry: Codable {
        var title: String
        var status: String
        var file: String
        var line: Int
        var stepsRun: Int
        var summary: String
        var failure: FailureEntry?
    }

    private struct FailureEntry: Codable {
        var kind: ScenarioFailure.Kind
        var file: String
        var line: Int
        var column: Int
        var statement: String?
        var expected: String
        var actual: String
        var message: String
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(passed, forKey: .passed)
        try container.encode(failed, forKey: .failed)
        try container.encode(results.map { result in
            Entry(title: result.title, status: result.passed ? "pass" : "fail", file: result.location.file, line: result.location.line,
                  stepsRun: result.stepsRun, summary: result.summary,
                  failure: result.failure.map {
                      FailureEntry(kind: $0.kind, file: $0.location.file, line: $0.location.line, column: $0.location.column,
                                   statement: $0.statement, expected: $0.expected, actual: $0.actual, message: $0.message)
                  })
        }, forKey: .scenarios)
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        results = try container.decode([Entry].self, forKey: .scenarios).map { entry in
            ScenarioResult(
                title: entry.title, location: ScenarioLocation(file: entry.file, line: entry.line),
                failure: entry.failure.map {
                    ScenarioFailure(kind: $0.kind, location: ScenarioLocation(file: $0.file, line: $0.line, column: $0.column),
                                    statement: $0.statement, expected: $0.expected, actual: $0.actual)
                },
                stepsRun: entry.stepsRun)
        }
    }
}
